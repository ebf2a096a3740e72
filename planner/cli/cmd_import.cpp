// `ucplan import`: an ONNX model's graph -> a ucplan-network/1 file (planner/import/).
#include <fmt/format.h>

#include "commands.h"
#include "planner/import/onnx_import.h"
#include "planner/model/graph.h"
#include "planner/model/json_util.h"
#include "planner/model/units.h"
#include "report.h"

namespace ucplan {

int run_import(const ImportCommandOptions& o) {
  ImportOptions options;
  options.name = o.name;
  Network net = import_onnx_file(o.model, options);
  Graph g = build_graph(net, o.model);
  write_file_atomically(o.output, network_to_json_text(net));
  std::int64_t act = 0;
  for (std::size_t l = 0; l < g.layers.size(); ++l) act += g.out_bytes_per_sample(static_cast<int>(l));
  fmt::print("{} -> {}: network \"{}\", input {}x{}x{}, {} layers ({} convs), {} parameters, {} labels, {} of activations per "
             "sample\n",
             o.model, o.output, net.name, net.input_shape[0], net.input_shape[1], net.input_shape[2], g.layers.size() - 1,
             g.conv_count(), with_thousands(g.total_params()), net.labels, format_bytes(act));
  return 0;
}

}  // namespace ucplan
