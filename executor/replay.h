// `ucplan run`: replays a verified plan on a backend. Allocates the plan's arena and host
// buffers, loads deterministic weights and a batch, then per iteration: zero the weight
// gradients, run the rounds (barrier between rounds), then the updates. Reports the measured
// median iteration time against the prediction, memory and bytes moved. In check mode every
// region the plan frees or offloads is poisoned (NaN) when the plan says so, the weight
// gradients of the first two iterations are compared with a reference run from the same weights
// (reference.h), and the input host buffers must still hold the batch at the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend.h"
#include "planner/model/plan.h"
#include "planner/ir/program.h"

namespace ucplan {

// Each step with the arena offsets of what its kernel reads and writes (the program from
// derive_program, planner/ir/program.h).
std::vector<ResolvedStep> resolve_steps(const Plan& plan, const Graph& g, const TaskGraph& tg);

struct RunOptions {
  int iterations = 5;  // timed iterations, after one warm-up iteration
  bool check = false;
  bool poison = true;       // with check: poison what the plan frees (off only to tell a bad kernel from a bad plan)
  double tolerance = 1e-3;  // largest relative L2 error |got - want| / |want| of a weight gradient
  double lr = 0.01;
  std::uint64_t seed = 0x5eed;
};

struct GradientError {
  std::string tensor;
  double max_rel_error = 0;
};

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
  std::vector<GradientError> errors;  // per weight-gradient tensor
  double max_rel_error = 0;
  std::string worst_tensor;
  std::string fault;  // an ExecutionFault met while checking
  bool passed = true;
};

RunReport replay_plan(const Plan& plan, Backend& backend, const RunOptions& o);

// Deterministic initial values shared by the replay and the reference run.
void init_weights(const GraphLayer& l, std::uint64_t seed, float* w);
void init_input(std::int64_t elems, std::uint64_t seed, float* x);  // the whole batch
void init_labels(std::int64_t n, std::int64_t classes, std::uint64_t seed, std::int32_t* labels);

}  // namespace ucplan
