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
//
// When none of the heuristic orders fits, a depth-first search looks for a placement that does
// (pack_below), as MiniMalloc does (Moffitt, "MiniMalloc: A Lightweight Memory Allocator for
// Hardware-Accelerated Machine Learning", ASPLOS 2023): buffers are placed in order of their
// offsets, each at the lowest offset its placed conflicting buffers leave it (any placement can be
// pushed down into such a canonical one and read back in that order), ties in a fixed order of
// preference; a branch is cut when a section of time cannot hold the bytes still to be placed in
// it above its floor (section inference), or when a buffer would go at or above the top of another
// that could still go lower (a needless gap). Its nodes are bounded, so the pass stays fast, and it
// runs only where a placement must fit the budget and the heuristics do not: a pool branch's plan
// (ScheduleInput::pool_bytes) and, on networks under kReferenceLayers, a plan simulated with more
// room than the budget (search.cpp). Measured: resnet20 b64 on model:v100 at 35 % of the liveness
// peak, +24.8 % -> +22.1 % (exact mode's plan then: +22.7 %), the pool branch's plan fitting the
// budget at the slack it was searched in; +21.2 % with the 1/64 pools it made worth searching
// (kPoolBranchShifts).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "planner/model/plan.h"

namespace ucplan {

struct OffsetReassignment {
  bool applied = false;           // the new offsets were smaller and replaced the old ones
  std::int64_t before_bytes = 0;  // arena with the simulation's offsets
  std::int64_t after_bytes = 0;   // arena with the new offsets (before_bytes when not applied)
  std::int64_t search_nodes = 0;  // applied by the search of pack_below: the nodes it visited (0: by best fit)
  std::int64_t search_work = 0;   // the search's nodes times its buffers, applied or not
};

// Applied when the new arena is below `arena_bytes` (to ask for "at most B", pass B + 1).
// `steps` indexed by id (steps[i].id == i). Resident buffers keep their offsets below the dynamic
// region, which starts at the end of the highest resident buffer. Plans of more than kMaxBuffers
// dynamic buffers keep the simulation's offsets (the pairwise test is quadratic).
//
// With `search`, when no heuristic order fits under `arena_bytes` and the busiest step does not
// rule it out, the search of pack_below tries, with a bounded number of nodes.
OffsetReassignment assign_offsets_after_scheduling(std::vector<PlanBuffer>& buffers, const std::vector<PlanStep>& steps,
                                                   std::int64_t arena_bytes, bool search = false);

// Dynamic storage allocation as a decision: byte offsets for buffers such that any two that
// conflict do not share bytes and each ends at or below `capacity`. Buffers whose step ranges
// [first, last] overlap must conflict (the search's section bounds count on it); buffers that do
// not overlap may conflict too (`conflicts` holds each pair both ways).
struct PackingProblem {
  std::vector<std::int64_t> size;
  std::vector<int> first, last;
  std::vector<std::vector<int>> conflicts;
  std::int64_t capacity = 0;
};

struct Packing {
  std::optional<std::vector<std::int64_t>> offsets;  // a placement that fits, if one was found
  bool exhausted = false;  // no placement fits: the whole tree was searched (none found in it)
  std::int64_t nodes = 0;  // nodes visited
};

// The search, in rounds: three orders of preference for ties (largest first, busiest section
// first, longest first), each round with twice the nodes of the last, from one per buffer, until
// one finds a placement, proves there is none, or `max_nodes` are spent.
Packing pack_below(const PackingProblem& p, std::int64_t max_nodes);

}  // namespace ucplan
