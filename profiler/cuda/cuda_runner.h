// The CUDA Runner (runner.h): measures one op of one layer on a CUDA device with the kernels of
// executor/cuda/kernels_cuda.h. Each measurement allocates its own inputs, outputs and
// workspace (cudaMalloc; a failure is recorded as "out_of_memory", never thrown), fills them with
// deterministic pseudo-random values, runs the op `warmup` times, then takes `repeats` samples:
// each times k back-to-back runs between one pair of CUDA events on one stream, k chosen after 10
// calibration runs so that a sample lasts at least 1 ms (at most 1000 runs), so host API time and
// launch latency are not in it; seconds = the median sample / k, spread = (max - min) / median.
// L2 is not flushed (the runs reuse their buffers, as an iteration's kernels do). Conv
// micro-batches are measured at the pointer alignment replay gives them (profile_network.h).
// An algorithm cuDNN rejects for the dims (a NOT_SUPPORTED status from the workspace query or the
// call) is "unsupported"; any other failure is "failed: <call, file:line, cuDNN/CUDA error>"; a
// sticky CUDA error (illegal address, launch failure...) throws DeviceFailure naming the
// measurement: every later one would fail too, so no profile is written.
// Convolutions run in FP32 without TF32 unless options.allow_tf32 (versions["math"] says which).
//
// Transfers: pinned host buffers, cudaMemcpyAsync on one stream, median of 5 after a warm-up.
// Duplex: 64 MiB host->device and device->host copies timed alone and together on two streams;
// duplex when together < 1.5 x the longer one alone (two copy engines give ~1.0x, one ~2x; an
// H100 measures 1.10-1.26x).
//
// device(): kind "cuda"; name and memory from cudaGetDeviceProperties; peak_flops = SMs x peak
// SM clock (cudaDevAttrClockRate) x FP32 lanes per SM (128 for Hopper, by compute capability; 0
// when unknown) x 2 — for an H100 SXM 132 x 1.98 GHz x 128 x 2 = 66.9 TFLOP/s, the datasheet's
// non-tensor FP32 figure; versions: cuda_runtime, driver (NVML's driver version), driver_cuda (the
// CUDA version the driver supports), cudnn, cudnn_cudart (CUDA version cuDNN was built with),
// cublas, compute_capability, math, ucplan.
// conditions() (after measuring): timing method, l2_flush, micro_batch_alignment, gpu_uuid,
// power_limit_w, ecc, mig, sm_clock_max_mhz, sm_clock_mhz_while_measuring (min-max of NVML
// samples), power_draw_w_max, temperature_c_max, clock_event_reasons_seen,
// nondeterministic_algorithms (cuDNN's perf results for the measured dims), and
// device_overhead_bytes: the device memory the CUDA context, cuDNN, cuBLAS and their loaded
// kernels hold (what `ucplan compile` keeps out of the budget).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "planner/ir/graph.h"
#include "profiler/runner.h"

namespace ucplan {

struct CudaRunnerOptions {
  bool allow_tf32 = false;  // let cuDNN/cuBLAS use TF32 tensor cores for FP32 (changes numerics)
  // bf16 / fp16 storage: conv (HALF/BFLOAT16 descriptors, FLOAT compute; tensor-op math unless
  // pseudo-fp16) and fc (cublasGemmEx, CUBLAS_COMPUTE_32F) measured natively; the other layers as
  // the backend runs them, FP32 kernels with the conversions of their operands timed with them.
  Storage storage = Storage::F32;
  bool pseudo_half = false;
  int warmup = 3;  // untimed runs before the timed repeats
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
                                                                     std::int64_t workspace_limit = std::int64_t{1}
                                                                                                    << 30);
std::vector<std::pair<std::string, double>> cudnn_find_backward_filter(const Graph& g, int layer, std::int64_t batch,
                                                                       int device_index = 0,
                                                                       std::int64_t workspace_limit = std::int64_t{1}
                                                                                                      << 30);

}  // namespace ucplan
