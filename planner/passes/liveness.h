// Liveness analysis (SuperNeurons §3.2) over the steps of one round: forward tasks in route
// order, then backward tasks. A tensor is live from the step that first touches it (its
// producer, or its first reader for host-provided inputs) to the last step that touches it;
// weights and weight gradients are always resident. Reports the baseline peak (every tensor
// allocated separately, Σl^f + Σl^b) and the liveness peak.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/ir/tasks.h"

namespace ucplan {

struct Liveness {
  std::int64_t batch = 0;
  std::vector<int> steps;                // task ids of one round, in order
  std::vector<int> first_step;           // per tensor: first step touching it, -1 if none (resident)
  std::vector<int> last_step;            // per tensor: last step touching it
  std::vector<std::int64_t> live_bytes;  // per step: resident + every tensor live during it
  std::vector<int> live_count;           // per step: number of non-resident live tensors
  std::int64_t resident_bytes = 0;
  std::int64_t baseline_peak = 0;
  std::int64_t liveness_peak = 0;
  int peak_step = -1;

  // Tensors live before (in) and after (out) a step, as in SuperNeurons Fig. 5.
  std::vector<int> in_set(int step) const;
  std::vector<int> out_set(int step) const;
};

Liveness compute_liveness(const TaskGraph& tg, std::int64_t batch);

}  // namespace ucplan
