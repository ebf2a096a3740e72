#include "program.h"

#include <fmt/format.h>

#include "planner/model/errors.h"

namespace ucplan {

std::vector<int> plan_route(const Plan& plan, const Graph& g, std::string* error) {
  std::vector<int> route{0};
  std::vector<char> seen(g.layers.size(), 0);
  seen[0] = 1;
  error->clear();
  for (const PlanStep& s : plan.steps) {
    if (s.op != StepOp::Forward) continue;
    const int l = g.index_of(s.layer);
    const std::string step = fmt::format("step {} ({} {})", s.id, step_op_name(s.op), s.layer);
    if (l <= 0) {
      *error = fmt::format("{}: unknown layer \"{}\"", step, s.layer);
      return {};
    }
    if (seen[l]) {
      *error = fmt::format("{}: layer {} runs forward twice", step, s.layer);
      return {};
    }
    for (int in : g.layers[l].inputs)
      if (!seen[in]) {
        *error = fmt::format("{}: runs before its input {}", step, g.layers[in].name());
        return {};
      }
    seen[l] = 1;
    route.push_back(l);
  }
  for (std::size_t l = 1; l < g.layers.size(); ++l)
    if (!seen[l]) {
      *error = fmt::format("the plan never runs forward of layer {}", g.layers[l].name());
      return {};
    }
  return route;
}

Program derive_program(const Plan& plan, std::string* error) {
  Program p;
  p.graph = build_graph(plan.network, "the plan's network", plan.precision);
  const std::vector<int> route = plan_route(plan, p.graph, error);
  if (!error->empty()) return p;
  p.tasks = build_tasks(p.graph, route);
  for (const Tensor& t : p.tasks.tensors) p.tensor_ids[t.name] = t.id;
  p.buffer_tensor.assign(plan.buffers.size(), -1);
  for (std::size_t b = 0; b < plan.buffers.size(); ++b) {
    auto it = p.tensor_ids.find(plan.buffers[b].tensor);
    if (it != p.tensor_ids.end()) p.buffer_tensor[b] = it->second;
  }
  return p;
}

Program derive_program(const Plan& plan) {
  std::string error;
  Program p = derive_program(plan, &error);
  UCPLAN_CHECK(error.empty(), "a verified plan's forward steps are a route: " + error);
  return p;
}

}  // namespace ucplan
