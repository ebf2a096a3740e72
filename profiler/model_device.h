// Analytic model devices: a Runner (runner.h) that answers with modelled costs instead of
// measuring, so plans can be made and tested without a GPU and the papers' settings replayed
// (moDNN's K40 12 GB; mu-cuDNN's P100-SXM2 and V100-SXM2). `ucplan profile NET --device
// model:k40` writes a profile whose source is "model:k40". Results are deterministic (spread 0).
//
// THE MODEL ("ucplan-model-1"). An op is a short sequence of kernels; each kernel costs
//
//     t = max(flops / (peak * e_algo * e_dev * sat(w) * depth(d)),  bytes / (bandwidth * e_mem))
//         + launches * kernel_launch_s
//
//   peak, bandwidth  datasheet FP32 FLOP/s and memory bytes/s (sources at the end).
//   e_algo           fraction of peak the kernel reaches at saturation (table below).
//   e_dev            ModelDeviceSpec::compute_efficiency. CALIBRATION: K40 0.40 -- with it the
//                    model gives 41 / 436 / 347 ms for AlexNet / VGG-16 / ResNet-50 at batch 16
//                    against 61.5 / 920 / 450 ms measured with Torch + cuDNN 5.0 on a K40c
//                    (jcjohnson/cnn-benchmarks); the VGG gap is cuDNN 5.0's lack of non-fused
//                    Winograd. P100 and V100 1.0 (see the sanity bands). H100/H200 0.85:
//                    ASSUMPTION, FP32 SIMT kernels reach less of Hopper's doubled FP32 peak.
//   sat(w)           = w / (w + sm_count * 8192): parallel work saturates the GPU. w = output
//                    elements the kernel computes for the micro-batch (forward b*K*Ho*Wo,
//                    backward-data b*C*H*W, backward-filter max(K*Cg*kh*kw, b*K*Ho*Wo) since
//                    split-K spreads the batch over the SMs; transformed-domain GEMMs count their
//                    transformed outputs). ASSUMPTION: one 128x64 output tile per SM is half a
//                    wave. This makes small micro-batches genuinely less efficient: every kernel's
//                    time is affine in b with a non-negative intercept, so an op's time is
//                    non-decreasing in b and its time per sample non-increasing (tested).
//   depth(d)         = d / (d + 16), d the reduction depth per output of the GEMM (forward
//                    Cg*kh*kw, backward-data Kg*kh*kw/(sh*sw), transformed domain Cg or Kg; not
//                    applied to filter gradients). ASSUMPTION: operand tiles need a few dozen
//                    steps to amortise their loads (1x1 convolutions over few channels are slow).
//   e_mem            fraction of the datasheet bandwidth streaming kernels reach. ASSUMPTION,
//                    typical of STREAM-like copies: K40 0.70 (ECC on), P100 0.75, V100 0.85,
//                    H100/H200 0.88.
//
// CONVOLUTION ALGORITHMS (names as in runner.h). Support rules follow cuDNN's documented
// configurations (cuDNN v5.1 User Guide, as transcribed in Theano's
// theano/gpuarray/tests/check_dnn_doc.py); unsupported combinations return "unsupported".
// b = micro-batch, Cg = C/g, Kg = K/g; workspace in bytes. Grouped convolutions: FLOPs and bytes
// over all groups in one call (cuDNN >= 7 groupCount), workspace of one group, reused group after
// group (as Caffe's per-group calls, which reproduces mu-cuDNN's 213 MiB for AlexNet conv2).
//   algorithm                   e_algo (fwd/data/filter)  workspace
//   implicit_gemm, algo_0       0.45 / 0.45 / 0.40        0
//   implicit_precomp_gemm,      0.70 / 0.65 / 0.55        index buffer Cg*kh*kw*4 (AlexNet conv2:
//     algo_1                                              4.7 KiB; mu-cuDNN Fig. 10: 4.3 KiB)
//   algo_3 (backward_filter)    0.60                      index buffer Cg*kh*kw*4
//   gemm (forward only)         im2col (memory-bound) +   lowered matrix Cg*kh*kw*Ho*Wo*b*4,
//                               SGEMM 0.80                proportional to b
//   direct                      always unsupported (cuDNN has no implementation)
//   winograd (fwd, data)        F(2x2,3x3): 2.25x fewer   transformed filter Kg*Cg*16*4
//                               multiplies; one kernel,
//                               0.55
//   winograd_nonfused           F(4x4,3x3) (4x fewer      (b*Cg*t + b*Kg*t + Kg*Cg)*36*4: the
//                               multiplies) or F(2x2,5x5) transformed input, output and filter,
//                               (2.78x), both 6x6 tiles:  t = tiles per plane; affine in b
//                               transforms (memory-bound)
//                               + 36 batched GEMMs, 0.75
//   fft                         transforms (2.5 N^2 log2 N^2 flops per plane, spectra written
//                               twice) + pointwise complex GEMM (8 flops per complex MAC, 0.45)
//                               + inverse transforms. N = smallest 2^a3^b5^c7^d >= H + 2*pad
//                               (and W), S = N_h*(N_w/2+1) complex points per plane.
//                               workspace (b*Cg + b*Kg + Kg*Cg)*S*8: affine in b (the filter's
//                               spectra are the intercept). AlexNet conv2: 212.5 MiB at b 256,
//                               48.9 MiB at b 32 -- both as mu-cuDNN Fig. 10 reports.
//   fft_tiling                  as fft on 32x32 tiles (kernel <= 32) swept one tile position at
//                               a time, pointwise 0.40: workspace (b*Cg + b*Kg + Kg*Cg)*St*8
//                               with St <= S (equal when the padded image fits one tile), more
//                               transform work and launches than fft.
//   Rules: fft needs stride 1, dilation 1, H+2p <= 256 and kernel > pad; fft_tiling stride 1,
//   dilation 1, kernel <= 32, kernel > pad; winograd 3x3 stride 1 dilation 1; winograd_nonfused
//   3x3 or 5x5, stride 1, dilation 1 (all three ops).
// Sanity rule (tested): no op is faster than its direct-convolution FLOPs / (peak * R), R = 1 for
// the GEMM family, 2.25 winograd, kh*kw*m^2/36 winograd_nonfused (4 or 2.78), kh*kw fft and
// fft_tiling (their pointwise product alone costs >= 2/(kh*kw) of the direct FLOPs).
//
// OTHER LAYERS: memory-bound kernels, bytes read + written over e_mem * bandwidth (their graph
// FLOPs at 0.5 * e_dev of peak), one launch (bn: two passes). Forward reads the inputs and writes
// the output; backward: relu reads Y and dY; max-pool and lrn read X, Y and dY; avg-pool reads dY;
// bn reads X twice (and dY twice); dropout adds one mask byte per element. fc is an SGEMM
// (e_algo 0.80, as a 1x1 convolution). update (batch 0, algo "sgd"): 3 x parameter bytes (read
// weight and gradient, write weight) / (e_mem * bandwidth) + one launch.
// A conv op whose tensors and workspace together exceed the device memory is "out_of_memory"
// (its workspace_bytes still says how much it wanted).
//
// PRECISIONS (planner/model/precision.h; the graph carries the profile's precision):
//   bytes      data tensors at the storage type's size (bf16, fp16, pseudo-fp16: 2 bytes), filters
//              read from their copy in it; transformed-domain data (Winograd, FFT spectra) and
//              workspaces stay FP32 (FP32 compute type). update also writes the weights' copy.
//   rates      kernels marked tensor (the GEMM of implicit_precomp_gemm, gemm, backward algo_1,
//              winograd_nonfused, and fc) run at the device's dense tensor-core rate for the
//              precision with e_dev = tensor_efficiency 0.6 (ASSUMPTION: cuDNN's tensor-core
//              convolutions reach about 60 % of the datasheet peak at saturation); the others
//              (implicit_gemm, algo_0, algo_3, fused winograd, FFT, transforms) and every kernel
//              of a device without tensor cores for it run at the FP32 rate. Datasheet dense
//              rates: V100-SXM2 fp16 125 TFLOP/s (no tf32, no bf16: TF32 is FP32 there, bf16 runs
//              on the FP32 units); A100-SXM4 tf32 156, bf16/fp16 312; H100 SXM5 and H200 tf32
//              494.7, bf16/fp16 989.4. K40 and P100: FP32 rate at every precision.
//   algorithms mu-cuDNN Table I: fp16 and bf16 (true half, tensor-op math) offer GEMM and
//              Winograd, not FFT (fft, fft_tiling "unsupported"); pseudo-fp16 (half data, FP32
//              compute) and fp32/tf32 offer all.
//
// FITTED DEVICES. model:h100-fit is model:h100 with, at FP32, each (layer type, op) scaled by the
// median of measured / modelled seconds over every kernel, algorithm and micro-batch of four
// networks profiled on an H100 80GB HBM3 (profiles/h100/: resnet50 b128, vgg16 b64, alexnet b256,
// resnet18 b128; cuDNN 9.14, cuBLAS 13.1, FP32 without TF32; 2026-11-24), against the same
// networks on model:h100 (benchmarks/results/gpu-h100.md part E tabulates the factors and the
// predictions below). What the datasheet model gets most wrong: fc forward and backward-data run
// 5x and 3x faster than a GEMM it models like a 1x1 convolution, fc backward-filter (the batch as
// the reduction) 2.8x slower; pooling backward 3.9x, softmax forward 4.6x, add forward 3.7x and
// LRN 2-3x slower (small kernels below the bandwidth the model gives them); convolutions 1.1-1.5x
// slower. With factors fitted on three of the four, the fourth's keep-all iteration measures
// 0.98x (vgg16), 1.16x (alexnet) and 1.11x (resnet50) its prediction, against 1.32x, 1.38x and
// 1.47x on model:h100. CIFAR-size networks' kernels (resnet20 b64) measure 2.7-4.3x over
// model:h100 for convolutions and 1.1-5.7x for the other classes: they are launch-bound, which
// the factors, fitted on ImageNet-size kernels, do not cover. Algorithms keep their modelled order
// within a class (one factor per class); other precisions are not fitted, and `ucplan profile`
// refuses them (its runner would give the datasheet model's costs under the fitted name). The
// pooling-backward factor predates the small kernel for global average pooling's
// backward (executor/cuda/kernels_cuda.cpp): global pools have got faster on the device since.
//
// TRANSFERS: seconds(bytes) = link_latency_s + bytes / bandwidth, exactly (no noise).
//
// SOURCES of the datasheet numbers:
//   K40:  NVIDIA Tesla K40 board specification BD-06902-001_v05 (Nov 2013): 2880 cores, base
//         clock 745 MHz (boards ship at base clock), 12 GB GDDR5 (~11.25 GB usable with ECC),
//         PCIe Gen3 x16; 2880 * 2 * 745 MHz = 4.29 TFLOP/s (5.04 at the 875 MHz boost; the
//         model uses base); 288 GB/s. Pinned copies on a K40m: 10.04 GB/s H2D, 10.05 GB/s D2H
//         (Microway, "NVIDIA Tesla K40 Atlas GPU Accelerator (Kepler GK110b) up close",
//         bandwidthTest --memory=pinned). 15 SMX.
//   P100-SXM2: 10.6 TFLOP/s FP32, 16 GB HBM2, 732 GB/s (NVIDIA Tesla P100 datasheet; mu-cuDNN
//         Table II); 56 SMs; host link PCIe Gen3 x16.
//   V100-SXM2: 15.7 TFLOP/s FP32, 16 GB HBM2, 900 GB/s (NVIDIA V100 datasheet; mu-cuDNN
//         Table II); 80 SMs; host link PCIe Gen3 x16.
//   A100-SXM4 80GB: 19.5 TFLOP/s FP32, 2.039 TB/s HBM2e, 108 SMs, PCIe Gen4 x16 (NVIDIA A100
//         datasheet); pinned PCIe ~25 GB/s, latency 9 us, e_dev 0.90 (ASSUMPTIONS).
//   H100 SXM5: 67 TFLOP/s FP32 non-tensor (66.9 in the H100 whitepaper), 80 GB HBM3 (the driver
//         reports 81559 MiB), 3.35 TB/s, 132 SMs, PCIe Gen5 x16 (NVIDIA H100 datasheet).
//   H200 SXM: the same GH100 compute (67 TFLOP/s FP32, 132 SMs), 141 GB HBM3e (the driver
//         reports 143771 MiB), 4.8 TB/s, PCIe Gen5 x16 (NVIDIA H200 datasheet).
//   Pinned PCIe throughput, ASSUMPTION from common bandwidthTest results: ~12 GB/s Gen3 (10 on
//   the K40's hosts, measured above), ~50 GB/s Gen5; per-copy latency 10 us (Gen3), 8 us (Gen5).
//   Kernel launch overhead, ASSUMPTION: 5 us (Kepler), 4 us (Pascal, Volta), 3 us (Hopper).
//   All five have two copy engines: duplex (H2D and D2H overlap).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler/runner.h"

namespace ucplan {

// A fitted device's correction of one (layer type, op): its modelled seconds times `factor`.
struct FittedScale {
  std::string type;  // layer_type_name: "conv", "fc", "pool", ...
  std::string op;    // task_kind_name: "forward", "backward_data", "backward", "update", ...
  double factor = 1;
};

struct ModelDeviceSpec {
  std::string name;          // "k40" (what follows "model:")
  std::string full_name;     // "NVIDIA Tesla K40 GK110B at 745 MHz base clock"
  double fp32_flops = 0;     // peak FP32 FLOP/s (datasheet)
  double mem_bandwidth = 0;  // device memory bytes/s (datasheet)
  std::int64_t memory_bytes = 0;
  double h2d_bandwidth = 0;    // pinned host -> device bytes/s
  double d2h_bandwidth = 0;    // pinned device -> host bytes/s
  double link_latency_s = 0;   // per copy
  double kernel_launch_s = 0;  // per kernel
  bool duplex = true;          // both copy directions overlap (two copy engines)
  // Efficiency parameters (see the model above).
  int sm_count = 0;                 // streaming multiprocessors: w_half = sm_count * 8192
  double compute_efficiency = 1.0;  // e_dev
  double memory_efficiency = 0.8;   // e_mem
  // Dense tensor-core FLOP/s per precision (datasheet), 0 where the device has none.
  double tf32_tensor_flops = 0, bf16_tensor_flops = 0, fp16_tensor_flops = 0;
  double tensor_efficiency = 0.6;  // e_dev of tensor-core kernels (ASSUMPTION, see PRECISIONS)
  // A fitted device (FITTED DEVICES above): at FP32 each (layer type, op) listed here costs its
  // modelled seconds times the factor; empty for the datasheet devices.
  std::vector<FittedScale> fitted = {};
  std::string fitted_from = {};  // what the factors were fitted to
};

// The known devices: k40, p100, v100, a100, h100, h200, h100-fit. nullptr when `name` is not one
// of them.
// Accepts "k40" and "model:k40".
const ModelDeviceSpec* find_model_device(const std::string& name);
std::vector<std::string> model_device_names();
// A Runner for a model device; throws UserError (where "--device") for an unknown name, listing
// the known ones.
std::unique_ptr<Runner> make_model_runner(const std::string& name);

// The version of the model's formulas, written into the profile's device.versions["model"].
inline constexpr const char* kModelVersion = "ucplan-model-1";

}  // namespace ucplan
