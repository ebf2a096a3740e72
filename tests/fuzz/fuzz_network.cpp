// libFuzzer harness: the network loader, then the graph (shapes) and the task graph built from it.
#include "planner/ir/graph.h"
#include "planner/model/network.h"
#include "planner/ir/tasks.h"
#include "planner/ir/route.h"
#include "tests/fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ucplan::fuzz::run_loader(data, size, [](const std::string& path) {
    const ucplan::Network net = ucplan::load_network(path);
    const ucplan::Graph g = ucplan::build_graph(net, path);
    ucplan::build_tasks(g, ucplan::construct_route(g));
  });
}
