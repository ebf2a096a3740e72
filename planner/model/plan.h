// A plan (`ucplan-plan/1`): self-contained and byte-deterministic. It embeds the network, the
// budget and options, hashes of its inputs, the sub-batch size and rounds, every convolution
// kernel's micro-configuration list, the arena (static offsets, sizes and lifetimes of every
// buffer), pinned host buffers, and the step program on named streams (compute, h2d, d2h) with
// waits and predicted start/end. Times are integer nanoseconds (exact, deterministic arithmetic).
//
// Execution semantics (what the executor and the verifier both assume):
//  - Weight gradients are zeroed at the start of an iteration; resident buffers (weights,
//    weight gradients) live for the whole program.
//  - Round steps (final = false) run `rounds` times, one sub-batch each; rounds are separated by
//    a barrier. Host input buffers (the batch's data, labels, sink gradients) hold the whole
//    batch; a prefetch of an input tensor copies the slice of the current round.
//  - A carried buffer holds a network input across the barrier between rounds, so that the round's
//    first layer need not wait for its copy: it holds the round's slice when the round starts (the
//    executor fills it with the first slice before the first iteration), and the round's `ahead`
//    prefetch writes the next round's slice into it (after the last round: the first slice of the
//    next batch, which the data loader has ready by then). Like a resident buffer it keeps its bytes
//    for the whole program; nothing reads it after the ahead prefetch in the same round.
//  - Then the final steps (updates) run once.
//  - A step starts when the previous step on its stream has ended and every step in `waits`
//    has ended; waits name earlier steps only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "network.h"
#include "ops.h"
#include "precision.h"

namespace ucplan {

struct MicroStep {
  std::string algo;
  std::int64_t batch = 0;
  bool operator==(const MicroStep&) const = default;
};

struct PlanBuffer {
  int id = -1;
  std::string tensor;       // tensor held ("Y:conv1"), or "workspace"
  std::int64_t offset = 0;  // in the arena
  std::int64_t size = 0;
  int first_step = -1;    // first step touching it (resident buffers: 0)
  int last_step = -1;     // last step touching it (resident buffers: the last step)
  bool resident = false;  // weights and weight gradients: the whole program
  bool carried = false;   // a network input kept across rounds (above); the whole program
  bool operator==(const PlanBuffer&) const = default;
};

struct PlanHostBuffer {
  int id = -1;
  std::string tensor;
  std::int64_t size = 0;  // bytes; an input buffer holds the whole batch
  bool input = false;     // provided by the data loader (filled before the iteration)
  bool operator==(const PlanHostBuffer&) const = default;
};

struct PlanStep {
  int id = -1;
  Stream stream = Stream::Compute;
  StepOp op = StepOp::Forward;
  std::string layer;              // compute steps: the layer
  std::string tensor;             // offload / prefetch: the tensor moved
  std::vector<int> waits;         // earlier steps on other streams
  std::vector<int> reads;         // arena buffers read
  std::vector<int> writes;        // arena buffers written from scratch
  std::vector<int> accumulates;   // arena buffers added into
  int workspace = -1;             // arena buffer (conv kernels with workspace)
  int host = -1;                  // host buffer (offload: written; prefetch: read)
  std::vector<MicroStep> config;  // conv kernels: micro-configurations in execution order
  // A recomputed convolution: the workspace its configuration needs, as the profile states it
  // (the kernels list states it per kernel for the forward pass's configuration; a recomputation
  // may run another, and cuDNN's needs are known only from the profile). -1: not stated.
  std::int64_t config_workspace_bytes = -1;
  std::int64_t start_ns = 0;  // predicted, relative to the start of the round (or of the final phase)
  std::int64_t end_ns = 0;
  bool final = false;  // runs once after all rounds (updates)
  bool ahead = false;  // prefetch into a carried buffer: copies the next round's slice (above)
  bool operator==(const PlanStep&) const = default;
};

// mu-cuDNN Fig. 10-style summary of one convolution kernel's choice in the forward/backward pass.
struct PlanKernel {
  std::string layer;
  StepOp op = StepOp::Forward;  // Forward, BackwardData or BackwardFilter
  std::vector<MicroStep> config;
  std::int64_t workspace_bytes = 0;
  std::int64_t time_ns = 0;
  std::int64_t undivided_ns = 0;  // fastest undivided configuration with unlimited workspace
  std::int64_t fastest_ns = 0;    // fastest configuration at the sub-batch, workspace unlimited (0: not recorded)
  std::int64_t baseline_ns = 0;   // zero-workspace (or smallest) configuration at the sub-batch
  bool operator==(const PlanKernel&) const = default;
};

struct PlanSummary {
  std::int64_t predicted_ns = 0;  // rounds * round_ns + final_ns
  std::int64_t round_ns = 0;
  std::int64_t final_ns = 0;
  std::int64_t ideal_ns = 0;           // unlimited memory, fastest configurations, whole batch at once
  std::int64_t peak_bytes = 0;         // arena high-water mark (= arena size)
  std::int64_t lower_bound_bytes = 0;  // moDNN Eq. 2
  std::int64_t offload_bytes = 0;      // per iteration
  std::int64_t prefetch_bytes = 0;     // per iteration, input copies included
  std::int64_t input_bytes = 0;        // of prefetch_bytes: the batch's inputs
  std::int64_t recompute_ns = 0;       // per iteration
  std::int64_t recompute_steps = 0;    // per round
  std::int64_t workspace_peak_bytes = 0;
  bool operator==(const PlanSummary&) const = default;
};

struct Plan {
  std::string generator;  // "ucplan 0.1.0"
  Network network;
  std::string network_sha256;  // of network_to_json_text(network)
  std::string profile_path;    // from the plan file's folder (path_from_output), '/' between names
  std::string profile_sha256;  // of the profile file's bytes
  std::string profile_source;  // "measured" | "model:NAME"
  std::string device;          // the profile's device name
  // Options, as given.
  std::int64_t batch = 0;
  std::int64_t budget_bytes = 0;
  std::string strategy;
  std::string sub_batch_option;           // auto | any | N
  std::string workspace_option;           // dynamic | wr:BYTES | wd:BYTES
  std::string micro_batches;              // micro-batch sizes conv kernels may use: all | powerOfTwo | undivided
  std::string solver = "default";         // fast | default | thorough | exact (compile --solver)
  std::int64_t solver_time_limit_ms = 0;  // exact: CBC's time limit, 0 for none
  std::string offload = "allowed";        // allowed | never (activations stay on the device)
  Precision precision = Precision::FP32;  // the profile's (precision.h)
  // Loss scaling (fp16 storage): "none", "static:S" (a fixed scale S) or "dynamic" (GradScaler:
  // start at 2^16, halve and skip the step on an inf/NaN gradient, double after 2000 good steps).
  std::string loss_scale = "none";
  // Decisions.
  std::int64_t sub_batch = 0;
  std::int64_t rounds = 0;
  std::int64_t modnn_sub_batch = 0;           // moDNN Eq. (3)'s suggestion, for comparison
  bool sub_batch_changes_statistics = false;  // a batch-norm network split into rounds
  std::string workspace_policy;               // what was used, in words
  std::int64_t arena_bytes = 0;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanHostBuffer> host_buffers;
  std::vector<PlanStep> steps;
  std::vector<PlanKernel> kernels;
  PlanSummary summary;
  std::vector<std::string> notes;  // warnings and remarks for the reader
};

Plan load_plan(const std::string& path);
std::string plan_to_json_text(const Plan& p);  // deterministic: one line per step/buffer/kernel

}  // namespace ucplan

// In messages a stream or op reads as its name.
template <>
struct fmt::formatter<ucplan::Stream> : fmt::formatter<std::string_view> {
  auto format(ucplan::Stream s, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(ucplan::stream_name(s), ctx);
  }
};
template <>
struct fmt::formatter<ucplan::StepOp> : fmt::formatter<std::string_view> {
  auto format(ucplan::StepOp o, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(ucplan::step_op_name(o), ctx);
  }
};
