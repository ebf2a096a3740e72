// The executor's backend interface: one arena, pinned host buffers, a compute stream and two
// copy streams (host->device, device->host) whose steps start after the steps they wait for.
// A backend runs resolved steps (replay.h turns a plan's steps into arena offsets by operand
// role, once); it knows how to run each op on its device, nothing about plans or scheduling.
// Two backends: cpu (always built; streams are threads, so overlap is real) and cuda.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "planner/ir/graph.h"
#include "planner/model/plan.h"
#include "planner/views/plan_views.h"

namespace ucplan {

// One plan step with its operands as arena offsets (-1: absent).
struct ResolvedStep {
  int id = -1;
  Stream stream = Stream::Compute;
  bool final = false;  // runs once after the rounds
  StepOp op = StepOp::Forward;
  int layer = -1;          // graph layer (compute steps)
  std::vector<int> waits;  // earlier steps of the same round (or of the final phase)
  // Compute operands (roles as in executor/cpu_ops.h LayerArgs).
  std::vector<std::int64_t> x;
  std::int64_t y = -1, w = -1, dw = -1, aux = -1, dy = -1, labels = -1;
  std::vector<std::int64_t> dx;
  std::vector<char> dx_accumulate;
  std::int64_t workspace = -1, workspace_bytes = 0;
  std::vector<MicroStep> config;  // conv kernels
  // Copies: device offset, host buffer, bytes; an input host buffer holds the whole batch and
  // each round copies its own slice (host offset = round * bytes).
  std::int64_t device = -1;
  int host = -1;
  std::int64_t bytes = 0;
  bool input = false;
  bool ahead = false;  // a prefetch into a carried buffer: the next round's slice (plan.h)
  // Check mode: regions whose buffers end with this step, to poison (NaN) once this step and
  // `poison_waits` (the buffers' last uses on other streams) are done.
  std::vector<std::pair<std::int64_t, std::int64_t>> poison_after;
  std::vector<int> poison_waits;
};

struct RunContext {
  std::int64_t sub_batch = 0;
  std::int64_t total_batch = 0;
  double lr = 0.01;
  std::uint64_t seed = 0x5eed;
  double loss_scale = 1;  // the loss gradient's scale this iteration (fp16 loss scaling)
  bool operator==(const RunContext&) const = default;
};

// Where copy step `s` reads or writes its host buffer in round `round`: an input host buffer holds
// the whole batch and each round copies its own slice; an ahead prefetch copies the next round's
// (after the last round, the first: the next batch's, which is this run's batch again).
inline std::int64_t host_offset(const ResolvedStep& s, int round, const RunContext& ctx) {
  if (!s.input) return 0;
  const std::int64_t rounds = ctx.sub_batch > 0 ? ctx.total_batch / ctx.sub_batch : 1;
  return (s.ahead ? (round + 1) % rounds : round) * s.bytes;
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string description() const = 0;
  // The device as a profile measured on it names it (Profile's device.name): `run --trace` records
  // it, so that calibrate refits a profile only from runs on the profile's device.
  virtual std::string device_name() const = 0;
  // Untimed iterations before the timed ones (replay_plan): what warms up (page faults, caches,
  // library workspaces) and, on CUDA with graphs, the capture.
  virtual int warmup_iterations() const { return 1; }
  // Throws UserError for a step this backend cannot run (a conv algorithm of another device, one
  // that does not support the convolution or needs more workspace than the step has), before
  // allocate() takes the plan's memory: a CUDA plan given to the CPU fails at once, not after
  // gigabytes are allocated and zeroed. submit() still checks each step it runs.
  virtual void check_steps(const std::vector<ResolvedStep>& /*steps*/) const {}
  // One arena and the host buffers (pinned where that means something).
  virtual void allocate(std::int64_t arena_bytes, const std::vector<std::int64_t>& host_bytes) = 0;
  virtual void* host(int id) = 0;
  // Synchronous transfers of initial values and results, outside the timed program.
  virtual void write(std::int64_t offset, const void* src, std::int64_t bytes) = 0;
  virtual void read(std::int64_t offset, void* dst, std::int64_t bytes) = 0;
  virtual void fill(std::int64_t offset, std::int64_t bytes, unsigned char value) = 0;
  // Timing of an iteration: begin(), then submit() steps in id order (non-blocking, each runs
  // on its stream after its waits within the same round), barrier() between rounds, end().
  virtual void begin() = 0;
  virtual void submit(const ResolvedStep& s, int round, const RunContext& ctx, bool poison) = 0;
  virtual void barrier() = 0;
  virtual std::vector<MeasuredStep> end() = 0;  // times since begin(), per executed step
  // Device memory this run holds (arena + host-side library overhead where measurable).
  virtual std::int64_t device_memory_bytes() = 0;
  // Device memory the runtime and libraries hold beside the arena (CUDA context, cuDNN, cuBLAS,
  // their loaded kernels), largest seen so far; 0 where there is none (cpu).
  virtual std::int64_t runtime_overhead_bytes() { return 0; }
  // What the backend changed to run the plan here (e.g. a conv algorithm substituted, substitute.h).
  virtual std::vector<std::string> notes() const { return {}; }
};

std::unique_ptr<Backend> make_cpu_backend(const Graph& g);
// MemAvailable of /proc/meminfo in bytes: what the kernel can give without swapping. 0 where there
// is no such file (not Linux): then nothing is checked against it.
std::int64_t host_memory_available();
#ifdef UCPLAN_HAVE_CUDA
// Throws UserError when no CUDA device is usable. exact: refuse a conv configuration this
// device cannot run as planned instead of substituting an algorithm (substitute.h). graphs: from
// the second iteration on, launch each round (and the final steps) as a CUDA graph captured once
// (cuda_backend.cpp says how), instead of a few host calls per step.
std::unique_ptr<Backend> make_cuda_backend(const Graph& g, int device_index, bool exact = false, bool graphs = false);
// The CUDA backend's check_steps without a device: every conv step's algorithms are cuDNN's for
// its op, or UserError naming `option` (e.g. "--device cuda:0"), the step, its layer and the
// algorithm: a plan compiled from a CPU profile is refused before its arena is allocated.
void check_cuda_algorithms(const Graph& g, const std::vector<ResolvedStep>& steps, const std::string& option);
#endif

// Data a kernel cannot work with (e.g. labels out of range) that only a wrong plan produces:
// in check mode it fails the check with this message instead of stopping the program.
class ExecutionFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// NaN in every float of a poisoned region: 0xFF bytes.
constexpr unsigned char kPoisonByte = 0xFF;

}  // namespace ucplan
