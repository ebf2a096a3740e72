// Costs of every task of a task graph at one sub-batch size, looked up in a profile: for a conv
// kernel, its Pareto front of configurations (mu-cuDNN §III-C) over the profile's micro-batch
// sizes; for any other task, the profiled time at the sub-batch. Times become integer
// nanoseconds here, once, so everything downstream is exact and deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conv_config.h"
#include "planner/ir/graph.h"
#include "planner/model/profile.h"
#include "planner/ir/tasks.h"

namespace ucplan {

struct TaskCost {
  bool conv = false;
  std::vector<ConvConfig> front;   // conv: workspace ascending, time descending
  std::int64_t time_ns = 0;        // non-conv: the time; conv: the fastest configuration's
  std::int64_t baseline_ns = 0;    // conv: the smallest-workspace configuration's time
  std::int64_t min_workspace = 0;  // conv: the smallest workspace of any configuration
  std::int64_t undivided_ns = 0;   // conv: fastest undivided configuration, unlimited workspace
};

struct CostTable {
  std::int64_t sub_batch = 0;
  std::vector<TaskCost> tasks;    // by task id
  std::vector<int> forward_task;  // per graph layer: its forward task id (recomputation cost), -1 for the input
  TransferCosts h2d, d2h;
  bool duplex = false;
  std::int64_t launch_gap_ns = 0;  // the profile's launch gap (profile.h), in every kernel's time below

  std::int64_t h2d_ns(std::int64_t bytes) const;
  std::int64_t d2h_ns(std::int64_t bytes) const;
};

// Throws UserError naming the profile file and the missing signature/op/size. `policy`
// restricts the micro-batch sizes conv kernels may use (mu-cuDNN §III-B): every measured size,
// powers of two, or undivided (the sub-batch itself: cuDNN alone).
// Layer `layer`'s costs in `p` (by its signature), or a UserError naming `file` and the layer: the
// profile is of another network, or of this one before it changed.
const SignatureCosts& profile_costs_of(const Graph& g, int layer, const Profile& p, const std::string& file);
CostTable build_cost_table(const Graph& g, const TaskGraph& tg, const Profile& p, const std::string& profile_file,
                           std::int64_t sub_batch, SizesPolicy policy = SizesPolicy::All);

// Sub-batch sizes the profile can cost: divisors of `batch` that are measured sizes.
std::vector<std::int64_t> costable_sub_batches(const Profile& p, std::int64_t batch);

std::int64_t seconds_to_ns(double seconds);

}  // namespace ucplan
