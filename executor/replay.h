// `ucplan run`: replays a verified plan on a backend. Allocates the plan's arena and host
// buffers, loads deterministic weights and a batch, then per iteration: zero the weight
// gradients, run the rounds (barrier between rounds), then the updates. Reports the measured
// median iteration time against the prediction, memory and bytes moved. In check mode every
// region the plan frees or offloads is poisoned (NaN) when the plan says so, the weight
// gradients of the first two iterations are compared with a reference run from the same weights
// (reference.h), and the input host buffers must still hold the batch at the end.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend.h"
#include "planner/model/plan.h"
#include "planner/ir/program.h"

namespace ucplan {

// Each step with the arena offsets of what its kernel reads and writes, from the plan's program
// (derive_program, planner/ir/program.h).
std::vector<ResolvedStep> resolve_steps(const Plan& plan, const Program& program);

// PyTorch GradScaler's bookkeeping (precision.h LossScale): after each iteration's rounds, a
// weight gradient with an inf or NaN skips the updates and multiplies the scale by the backoff
// factor; otherwise the updates run on the gradients divided by the scale, and after
// growth_interval such steps in a row the scale grows by the growth factor. A static scale
// never changes but still skips a step with inf/NaN gradients.
struct LossScaler {
  LossScale config;
  double scale = 1;
  int good_steps = 0;  // in a row, since the last change
  int skipped = 0;     // steps skipped in all
  explicit LossScaler(const LossScale& c) : config(c), scale(c.kind == LossScale::Kind::None ? 1 : c.scale) {}
  bool active() const { return config.kind != LossScale::Kind::None; }
  // Records one step; true when its updates run.
  bool step(bool found_inf);
};

// The default `--check` tolerance: 1e-3 on the CPU and 1e-2 against cuDNN at fp32; at another
// precision at least 8 units of its roundoff (precision.h unit_roundoff: 2^-8 at bf16, 2^-11 at
// fp16 and tf32): the plan's run and the reference may round one stored value differently (sums
// in another order land on the other side of a tie), a difference of one unit in the last place
// (2u) that a few layers carry on; a scheduling error gives NaN (poison) or O(1) errors.
double default_check_tolerance(Precision p, bool cuda);

struct RunOptions {
  int iterations = 5;  // timed iterations, after one warm-up iteration
  bool check = false;
  bool poison = true;       // with check: poison what the plan frees (off only to tell a bad kernel from a bad plan)
  double tolerance = 1e-3;  // largest relative L2 error |got - want| / |want| of a weight gradient
  double lr = 0.01;
  std::uint64_t seed = 0x5eed;
  // With check at bf16 / fp16 (storage of 16 bits) on a device whose arithmetic is not the CPU's
  // emulation (cuDNN's tensor cores accumulate in other orders and round elsewhere): also run the
  // reference at FP32, and let each weight gradient differ from the emulated reference by up to
  // kFloorFactor times the emulation's own distance from FP32 (its floor), or the tolerance. Batch
  // norm's backward amplifies a 16-bit rounding difference more than a hundredfold through a deep
  // network (measured: a resnet20's first conv at 0.31 relative error at bf16 on an H100), so a
  // fixed tolerance either fails every correct plan or passes a wrong one.
  bool fp32_floor = false;
  // With check on a device whose kernels are not the reference's (cuDNN's): also run the reference
  // with every convolution's output jittered by kRoundingJitter (reference.h `perturb`), and let
  // each weight gradient differ by up to kFloorFactor times that run's distance from the reference
  // (its rounding floor), or the tolerance. Two correct FP32 runs that sum in other orders are that
  // far apart: on ResNet-50 b64 the CPU's gemm and direct convolutions differ by up to 2.1e-2 (a
  // relative L2 error of weight gradients that batch norm's backward amplifies through depth), and
  // an H100's cuDNN plans at 100 % and 25 % of the peak by 0.79 to 1.27 times that, tensor by tensor
  // (benchmarks/RESULTS.md); a fixed 1e-2 failed every ResNet-50 plan, keep-all too.
  bool rounding_floor = false;
  // Called with one line at each stage of a checked iteration (the plan's run, each reference run,
  // with its seconds): a check of a large network spends minutes in the CPU reference.
  std::function<void(const std::string&)> progress;
  // With check: the host memory free for the run (`ucplan run` reads MemAvailable); a plan whose
  // host buffers and reference run (reference_bytes_at_least) need more is refused before anything
  // is allocated, instead of the reference being killed for memory minutes in. 0: not checked.
  std::int64_t host_bytes_available = 0;
};

// The jitter of the rounding floor: every convolution output times 1 + u * 2^-23, u uniform in
// [-1, 1) (twice FP32's unit roundoff: one rounding in another place). Its distance from the plain
// reference is, weight gradient by weight gradient, 0.86 to 1.51 times the gemm-versus-direct one
// on ResNet-20 b64 (median 1.11) and 0.84 to 1.07 times on ResNet-50 b64 (median 0.95; largest
// 2.1e-2), at the cost of a gemm run where the direct one took five times as long
// (bench_rounding_floor). The H100's cuDNN runs of four ResNet-50 b64 plans were 0.79 to 1.42 times
// it (median 1.08), and the check with it passed at 63 % of its limit (benchmarks/RESULTS.md, I).
constexpr double kRoundingJitter = 0x1p-23;

// The limit of the check against a floor (RunOptions::fp32_floor, rounding_floor): the plan's
// gradients may be this many times as far from the reference as the floor's run is. Two runs that
// are each one floor away in independent directions are about sqrt(2) floors apart.
constexpr double kFloorFactor = 2.0;

// A checked weight gradient's largest relative L2 error: the tolerance, or kFloorFactor times the
// floor when that is larger (floor 0 without one).
inline double check_limit(double tolerance, double floor) { return std::max(tolerance, kFloorFactor * floor); }

// |got - want| / |want| in L2 (|got - want| when want is 0); NaN (a read of poison) is infinite.
double relative_l2_error(const std::vector<float>& got, const std::vector<float>& want);

struct GradientError {
  std::string tensor;
  double max_rel_error = 0;
  // The larger of fp32_floor's (the emulated reference's relative L2 distance from FP32's) and
  // rounding_floor's (the jittered reference's from the reference); 0 without either.
  double floor = 0;
  // The error as a share of its limit (check_limit): above 1 fails.
  double share_of_limit(double tolerance) const { return max_rel_error / check_limit(tolerance, floor); }
};

// One weight gradient against the reference `want`; with `fp32` (the same reference at FP32,
// RunOptions::fp32_floor) and `jittered` (RunOptions::rounding_floor) also its floor. Replay's
// check and ucplan-cuda-check judge alike by it.
GradientError compare_gradient(const std::string& tensor, const std::vector<float>& got, const std::vector<float>& want,
                               const std::vector<float>* fp32, const std::vector<float>* jittered = nullptr);

struct RunReport {
  std::string backend;
  std::vector<double> iteration_seconds;  // timed iterations
  double median_seconds = 0;
  double predicted_seconds = 0;
  std::int64_t arena_bytes = 0;
  std::int64_t device_memory_bytes = 0;
  std::int64_t bytes_h2d = 0, bytes_d2h = 0;  // per iteration
  std::vector<MeasuredStep> timeline;         // the last timed iteration
  // Check mode.
  bool checked = false;
  int checked_iterations = 0;         // iterations whose gradients were compared (2)
  std::vector<GradientError> errors;  // per weight-gradient tensor (the last checked iteration's)
  // With a floor: the worst tensor's error as a share of its limit, max(tolerance, kFloorFactor x floor)
  bool floor_checked = false;
  double worst_share_of_limit = 0;
  std::string worst_share_tensor;
  double max_rel_error = 0;
  std::string worst_tensor;
  std::string fault;  // an ExecutionFault met while checking
  bool passed = true;
  // Loss scaling (fp16): the plan's option, the scale at the start and at the end, the steps
  // (iterations, warm-up included) whose updates were skipped for inf/NaN gradients.
  std::string loss_scale = "none";
  double initial_loss_scale = 1, final_loss_scale = 1;
  int steps = 0, skipped_steps = 0;
  int overflow_checked = 0;  // checked iterations where the plan and the reference both overflowed
};

RunReport replay_plan(const Plan& plan, Backend& backend, const RunOptions& o);

// The replay's initial values, into a backend the plan's buffers are allocated on: every layer's
// FP32 master weights (and their copy in the storage type) into their resident buffers, the batch
// (the storage type's elements) and labels into the input host buffers. Shared with
// ucplan-cuda-check, so both replay the same program from the same start.
void load_initial_values(const Plan& plan, const Program& program, Backend& backend, std::uint64_t seed);

// Deterministic initial values shared by the replay and the reference run.
void init_weights(const GraphLayer& l, std::uint64_t seed, float* w);
void init_input(std::int64_t elems, std::uint64_t seed, float* x);  // the whole batch
void init_labels(std::int64_t n, std::int64_t classes, std::uint64_t seed, std::int32_t* labels);

}  // namespace ucplan
