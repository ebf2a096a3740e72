// ucplan-import (`ucplan import` runs it): an ONNX model's graph -> a ucplan-network/1 file. A
// program of its own so that only it links ONNX and protobuf: `ucplan` and the GPU bundle do
// not need them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "planner/import/onnx_import.h"
#include "planner/ir/graph.h"
#include "planner/model/json_util.h"
#include "planner/model/program.h"
#include "planner/model/units.h"

namespace ucplan {
namespace {

struct ImportCommandOptions {
  std::string model, output, name;
};

int run_import(const ImportCommandOptions& o) {
  check_outputs({{"-o", o.output}}, {{"the ONNX model", o.model}});
  ImportOptions options;
  options.name = o.name;
  Network net = import_onnx_file(o.model, options);
  Graph g = build_graph(net, o.model);
  write_file_atomically(o.output, network_to_json_text(net));
  std::int64_t act = 0;
  for (std::size_t l = 0; l < g.layers.size(); ++l) act += g.out_bytes_per_sample(static_cast<int>(l));
  fmt::print(
      "{} -> {}: network \"{}\", input {}x{}x{}, {} layers ({} convs), {} parameters, {} labels, {} of activations per "
      "sample\n",
      o.model, o.output, net.name, net.input_shape[0], net.input_shape[1], net.input_shape[2], g.layers.size() - 1,
      g.conv_count(), with_thousands(g.total_params()), net.labels, format_bytes(act));
  return 0;
}

}  // namespace
}  // namespace ucplan

int main(int argc, char** argv) {
  CLI::App app{"ucplan import: convert an ONNX model's graph (weights not needed) into a ucplan network JSON file"};
  app.name("ucplan import");
  ucplan::ImportCommandOptions o;
  app.add_option("model", o.model, "ONNX file, e.g. exported by scripts/export_torch.py")->required();
  app.add_option("-o,--output", o.output, "network file to write (written atomically)")->required();
  app.add_option("--name", o.name, "network name (default: the file's name without .onnx)");
  return ucplan::run_program(app, "ucplan import", argc, argv, [&] { return ucplan::run_import(o); });
}
