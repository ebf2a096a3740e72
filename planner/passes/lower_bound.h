// Memory lower bound, moDNN Eq. (2): the weights (and their gradients, resident) plus the
// largest single task at sub-batch 1 with zero-workspace algorithms:
//   M_min = S_W + max_t ( Σ_{d ∈ I(t)} Size(d, 1) + Size(O(t), 1) ).
// Sizes are counted as the arena places them, each rounded up to its alignment (256 bytes), so
// the bound is exactly what a plan needs: any budget at or above it admits a plan (offloading
// everything else and defragmenting when needed).
#pragma once

#include <cstdint>

#include "planner/ir/tasks.h"

namespace ucplan {

struct LowerBound {
  std::int64_t bytes = 0;           // S_W + max task footprint
  std::int64_t resident_bytes = 0;  // S_W: weights and weight gradients
  std::int64_t max_task_bytes = 0;  // the max term, at the given sub-batch
  int task = -1;                    // the task that attains it
  std::int64_t sub_batch = 1;
};

// Eq. (1) without workspace, maximised over tasks: the bound at any sub-batch size b
// (Eq. (2) is b = 1).
LowerBound memory_lower_bound(const TaskGraph& tg, std::int64_t sub_batch = 1);

}  // namespace ucplan
