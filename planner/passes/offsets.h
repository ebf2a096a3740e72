// Offsets after scheduling. The schedule pass places each buffer when the simulation allocates it
// (moDNN's first fit, or best fit / two-ended), which leaves gaps between buffers. Once the whole
// schedule is known, the dynamic buffers are placed again as XLA's heap simulator places them
// (GlobalDecreasingSizeBestFitHeap, xla/service/heap_simulator.h): largest first, each at the
// best-fitting gap among the buffers it may not share bytes with. The new offsets are kept only
// when the arena shrinks.
//
// Two buffers may share bytes when every step touching the earlier one happens before the first
// step of the later one through the plan's own stream order and waits (the verifier's rule,
// planner/check/verify.cpp); no wait is added, so the steps, their order and the predicted times
// stay as they are: only offsets and the arena size change.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/model/plan.h"

namespace ucplan {

struct OffsetReassignment {
  bool applied = false;           // the new offsets were smaller and replaced the old ones
  std::int64_t before_bytes = 0;  // arena with the simulation's offsets
  std::int64_t after_bytes = 0;   // arena with the new offsets (before_bytes when not applied)
};

// Applied when the new arena is below `arena_bytes` (to ask for "at most B", pass B + 1).
// `steps` indexed by id (steps[i].id == i). Resident buffers keep their offsets below the dynamic
// region, which starts at the end of the highest resident buffer. Plans of more than kMaxBuffers
// dynamic buffers keep the simulation's offsets (the pairwise test is quadratic).
OffsetReassignment assign_offsets_after_scheduling(std::vector<PlanBuffer>& buffers, const std::vector<PlanStep>& steps,
                                                   std::int64_t arena_bytes);

}  // namespace ucplan
