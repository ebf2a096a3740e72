// `ucplan networks`: the zoo, one line per network.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "commands.h"
#include "planner/model/errors.h"
#include "planner/ir/graph.h"
#include "planner/model/json_util.h"
#include "planner/model/units.h"
#include "report.h"

namespace ucplan {

Precision parse_precision_option(const std::string& text) {
  Precision p;
  if (!parse_precision(text, &p))
    throw UserError("", "--precision", fmt::format("expected {}, got \"{}\"", precision_choices(), text));
  return p;
}

namespace {

// The table's description: its first kDescriptionWidth characters, cut at a space, so that one
// long description does not widen every line (--json gives them whole).
constexpr std::size_t kDescriptionWidth = 72;
std::string headline(const std::string& description) {
  if (description.size() <= kDescriptionWidth) return description;
  std::size_t cut = description.rfind(' ', kDescriptionWidth - 3);
  if (cut == std::string::npos || cut == 0) cut = kDescriptionWidth - 3;
  return description.substr(0, cut) + "...";
}

}  // namespace

int run_networks(const NetworksOptions& o) {
  namespace fs = std::filesystem;
  std::string zoo = zoo_directory();
  std::error_code ec;
  if (!fs::is_directory(zoo, ec))
    throw UserError(zoo, "", "the network zoo folder does not exist (set UCPLAN_NETWORKS)");
  std::vector<std::string> names;
  for (auto it = fs::recursive_directory_iterator(zoo, ec); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file() || it->path().extension() != ".json") continue;
    std::string rel = fs::relative(it->path(), zoo).string();
    names.push_back(rel.substr(0, rel.size() - 5));
  }
  std::sort(names.begin(), names.end());
  Table table({"network", "layers", "convs", "parameters", "activations/sample", "input", "description"},
              {false, true, true, true, true, false, false});
  OrderedJson list = OrderedJson::array();
  for (const auto& name : names) {
    std::string path = zoo + "/" + name + ".json";
    Graph g = build_graph(load_network(path), path);
    std::int64_t act = 0;
    for (std::size_t l = 0; l < g.layers.size(); ++l) act += g.out_bytes_per_sample(static_cast<int>(l));
    std::string input = fmt::format("{}x{}x{}", g.net.input_shape[0], g.net.input_shape[1], g.net.input_shape[2]);
    table.add({name, std::to_string(g.layers.size() - 1), std::to_string(g.conv_count()),
               with_thousands(g.total_params()), format_bytes(act), input, headline(g.net.description)});
    list.push_back({{"name", name},
                    {"layers", g.layers.size() - 1},
                    {"convs", g.conv_count()},
                    {"parameters", g.total_params()},
                    {"activation_bytes_per_sample", act},
                    {"input", g.net.input_shape},
                    {"description", g.net.description}});
  }
  if (o.json)
    fmt::print("{}", dump_json(list));
  else
    fmt::print("{}{} network{} in {}\n", table.str(), names.size(), names.size() == 1 ? "" : "s", zoo);
  return 0;
}

}  // namespace ucplan
