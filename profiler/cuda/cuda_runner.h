// The CUDA Runner (runner.h): measures one op of one layer on a CUDA device with the kernels of
// executor/cuda/kernels_cuda.h. Each measurement allocates its own inputs, outputs and
// workspace (cudaMalloc; a failure is recorded as "out_of_memory", never thrown), fills them with
// deterministic pseudo-random values, runs the op `warmup` times, then times `repeats` runs one
// by one with CUDA events on one stream: seconds = the median, spread = (max - min) / median.
// An algorithm cuDNN rejects for the dims (a NOT_SUPPORTED status from the workspace query or the
// call) is "unsupported"; any other failure is "failed: <call, file:line, cuDNN/CUDA error>".
// Convolutions run in FP32 without TF32 unless options.allow_tf32 (versions["math"] says which).
//
// Transfers: pinned host buffers, cudaMemcpyAsync on one stream, median of 5 after a warm-up.
// Duplex: 64 MiB host->device and device->host copies timed alone and together on two streams;
// duplex when together < 1.3 x the longer one alone (two copy engines give ~1.0x, one ~2x).
//
// device(): kind "cuda"; name and memory from cudaGetDeviceProperties; peak_flops = SMs x peak
// SM clock (cudaDevAttrClockRate) x FP32 lanes per SM (128 for Hopper, by compute capability; 0
// when unknown) x 2 — for an H100 SXM 132 x 1.98 GHz x 128 x 2 = 66.9 TFLOP/s, the datasheet's
// non-tensor FP32 figure; versions: cuda_runtime, driver (the CUDA version the driver supports),
// cudnn, cudnn_cudart (CUDA version cuDNN was built with), cublas, compute_capability, math,
// ucplan.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "planner/model/graph.h"
#include "profiler/runner.h"

namespace ucplan {

struct CudaRunnerOptions {
  bool allow_tf32 = false;  // let cuDNN/cuBLAS use TF32 tensor cores for FP32 (changes numerics)
  int warmup = 3;           // untimed runs before the timed repeats
};

// Throws UserError("", "--device cuda", "no CUDA device: <why>") when no device can be used
// (no driver, no GPU, index out of range, cuDNN cannot start).
std::unique_ptr<Runner> make_cuda_runner(int device_index);
std::unique_ptr<Runner> make_cuda_runner(int device_index, const CudaRunnerOptions& options);

// cuDNN's own ranking of the algorithms for one conv layer at one micro-batch size
// (cudnnFindConvolution*AlgorithmEx, workspace up to workspace_limit bytes): (runner.h algorithm
// name, seconds), fastest first, only the algorithms that ran. For sanity checks of a measured
// profile on a GPU; throws UserError without a device and CudaError on a CUDA failure.
std::vector<std::pair<std::string, double>> cudnn_find_forward(const Graph& g, int layer, std::int64_t batch,
                                                               int device_index = 0,
                                                               std::int64_t workspace_limit = std::int64_t{1} << 30);
std::vector<std::pair<std::string, double>> cudnn_find_backward_data(const Graph& g, int layer, std::int64_t batch,
                                                                     int device_index = 0,
                                                                     std::int64_t workspace_limit = std::int64_t{1} << 30);
std::vector<std::pair<std::string, double>> cudnn_find_backward_filter(const Graph& g, int layer, std::int64_t batch,
                                                                       int device_index = 0,
                                                                       std::int64_t workspace_limit = std::int64_t{1} << 30);

}  // namespace ucplan
