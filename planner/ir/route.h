// Execution route for non-linear networks: SuperNeurons Alg. 1 (§3.1) — a depth-first walk
// from the input that enters a join only when all of its inputs have been routed (join
// counters). Iterative, so 10^4-layer networks do not overflow the stack.
#pragma once

#include <vector>

#include "planner/ir/graph.h"

namespace ucplan {

std::vector<int> construct_route(const Graph& g);

}  // namespace ucplan
