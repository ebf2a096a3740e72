#include "route.h"

#include "planner/model/errors.h"

namespace ucplan {

std::vector<int> construct_route(const Graph& g) {
  const int n = static_cast<int>(g.layers.size());
  std::vector<int> counter(n, 0);
  std::vector<int> route;
  route.reserve(n);
  // The stack holds pending RouteConstruct(layer) calls; children are pushed in reverse so the
  // first consumer is explored first, exactly as the recursive algorithm does.
  std::vector<int> stack{0};
  while (!stack.empty()) {
    int layer = stack.back();
    stack.pop_back();
    const auto& gl = g.layers[layer];
    ++counter[layer];
    if (layer != 0 && counter[layer] < static_cast<int>(gl.inputs.size())) continue;
    route.push_back(layer);
    for (auto it = gl.consumers.rbegin(); it != gl.consumers.rend(); ++it) stack.push_back(*it);
  }
  UCPLAN_CHECK(static_cast<int>(route.size()) == n, "every layer of a validated graph is reachable from the input");
  return route;
}

}  // namespace ucplan
