// A plan's program: the graph of its embedded network and the task graph in the plan's own
// forward order. The verifier, the CPU and CUDA replays and `ucplan run` all derive it here, so
// the plan -> (graph, tasks) step is written once.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "planner/ir/graph.h"
#include "planner/ir/tasks.h"
#include "planner/model/plan.h"

namespace ucplan {

struct Program {
  Graph graph;
  TaskGraph tasks;
  // Plan files name tensors ("Y:conv1"); inside, tensors are ids. Per name, its id; per plan
  // buffer, its tensor's id (-1: a workspace, or a name the tasks do not have).
  std::unordered_map<std::string, int> tensor_ids;
  std::vector<int> buffer_tensor;
};

// The layers in the order of the plan's forward steps, input first. "" in *error when the plan
// runs every layer forward exactly once after its inputs; else the reason, naming the step.
std::vector<int> plan_route(const Plan& plan, const Graph& g, std::string* error);

// Throws UserError when the embedded network is invalid, and fills *error (leaving the program
// without tasks) when the forward steps are not a route; a verified plan never fails either way.
Program derive_program(const Plan& plan, std::string* error);
// For verified plans: any failure is an internal error.
Program derive_program(const Plan& plan);

}  // namespace ucplan
