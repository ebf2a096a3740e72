// One op of one layer on the CPU kernels (cpu/kernels.h): what the CPU profiler times, and what
// the CPU backend and the reference run execute. Pointers follow the task model (tasks.h):
// weights and bias share one buffer (bias after the weights), bn's gamma/beta likewise; a
// layer's saved state (bn mean/inv-std, dropout mask) is `aux`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/cpu/half.h"
#include "executor/cpu/kernels.h"
#include "planner/ir/graph.h"
#include "planner/model/plan.h"

namespace ucplan {

struct LayerArgs {
  std::vector<const float*> x;      // inputs (forward; backward where it reads X)
  float* y = nullptr;               // output activation (forward writes it; some backwards read it)
  const float* w = nullptr;         // weights (+ bias)
  float* dw = nullptr;              // weight gradient (+ bias gradient), accumulated
  void* aux = nullptr;              // bn: float[2C] saved mean, inv-std; dropout: uint8 mask
  const float* dy = nullptr;        // gradient of the output
  std::vector<float*> dx;           // per input: its gradient, or null (no gradient for it)
  std::vector<char> dx_accumulate;  // per input: add to dx (another consumer wrote it first)
  const std::int32_t* labels = nullptr;
  void* workspace = nullptr;
  std::int64_t workspace_bytes = 0;  // its size: a conv kernel checks its need against it
  std::int64_t n = 0;                // samples in this call
  std::int64_t first_sample = 0;     // index of the first sample in the whole batch (dropout masks)
  std::int64_t total_batch = 1;      // the whole batch (scale of the loss gradient)
  std::uint64_t seed = 0x5eed;       // dropout
  double lr = 0.01;                  // update
  double loss_scale = 1;             // softmax_loss backward multiplies its gradient by it (fp16 loss scaling)
};

// A precision (planner/model/precision.h) emulated on the CPU with FP32 compute. bf16 and fp16
// storage: activations and their gradients are 16-bit in memory, widened exactly before an op
// and rounded to nearest even into the storage type on every store; conv and fc read their
// weights from the copy in the storage type (graph.h). tf32: conv and fc operands are rounded
// to tf32 before the FP32 arithmetic (FP32 accumulation throughout, as on tensor cores).
struct CpuPrecision {
  bool half = false;  // bf16 / fp16 storage
  cpu::Half type = cpu::Half::BF16;
  bool tf32 = false;
  // true: the operands of a layer op point to 16-bit elements (the backend's arena); false: to
  // floats that hold values of the storage type (the reference run), rounded in place on store.
  bool packed = true;
  bool active() const { return half || tf32; }
};
CpuPrecision cpu_precision(Precision p, bool packed);

// Runs `run` (one layer op, or a conv kernel over its micro-configuration) on FP32 copies of
// the operands of `a` that the precision stores or computes differently, then stores what the
// op wrote (forward: Y, except the loss's FP32 output; backward: the input gradients) back in
// the storage type. An update then refreshes the weights' copy from the FP32 master (packed).
void run_emulated(const GraphLayer& l, StepOp op, const LayerArgs& a, const CpuPrecision& p,
                  const std::function<void(const LayerArgs&)>& run);

// op: a compute op (forward, recompute, backward, backward_data, backward_filter, update).
// algo: a CPU conv algorithm name for conv ops, else ignored.
void run_layer_op_cpu(const GraphLayer& l, StepOp op, const std::string& algo, const LayerArgs& a);
std::int64_t layer_op_workspace_cpu(const GraphLayer& l, StepOp op, const std::string& algo, std::int64_t n);
bool layer_op_supported_cpu(const GraphLayer& l, StepOp op, const std::string& algo, std::int64_t n);
std::vector<std::string> conv_algorithms_cpu();

// The CPU algorithm the reference run (`ucplan run --check`) uses for a plan's conv algorithm,
// so that a plan compiled for any device can be checked on the CPU: a CPU name stays as it is;
// a cuDNN name (profiler/runner.h) maps to the CPU algorithm that computes the same sums in the
// most similar order: "direct" -> direct, and every other one -> gemm (cuDNN's GEMM family,
// implicit_gemm, implicit_precomp_gemm, gemm and backward algo_0/algo_1/algo_3, is the same
// dot products with FP32 accumulation; FFT and Winograd round differently from any CPU
// algorithm, and gemm is the CPU's most accurate). "" for a name neither backend knows.
std::string reference_conv_algo_cpu(StepOp op, const std::string& algo);

// A conv kernel over its micro-configuration: the micro-batches run one after another on one
// workspace, pointers offset along N (mu-cuDNN §II); backward-filter accumulates.
void run_conv_config_cpu(const GraphLayer& l, StepOp op, const std::vector<MicroStep>& config, const LayerArgs& a);

// A conv or pool layer's kernel dimensions at n samples (the same for the CPU and CUDA kernels).
cpu::ConvDims conv_dims(const GraphLayer& l, std::int64_t n);
cpu::PoolDims pool_dims(const GraphLayer& l, std::int64_t n);

// A point-wise activation layer's function and parameters; a mul layer's dimensions.
cpu::ActivationDims activation_dims(const GraphLayer& l);
cpu::MulDims mul_dims(const GraphLayer& l, std::int64_t n);

// Per-sample elements of a layer's output and of input i.
std::int64_t out_elems(const GraphLayer& l);
std::int64_t in_elems(const GraphLayer& l, std::size_t i);

}  // namespace ucplan
