// `ucplan inspect`: the graph pass's per-layer table and the memory totals of liveness analysis
// (SuperNeurons §3.2) and the lower bound (moDNN Eq. 2).
#include <fmt/format.h>

#include "commands.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/ir/tasks.h"
#include "planner/model/units.h"
#include "planner/passes/liveness.h"
#include "planner/passes/lower_bound.h"
#include "planner/ir/route.h"
#include "report.h"

namespace ucplan {

namespace {

// A layer's inputs, comma-separated; for the table (`width` > 0) at most about `width` characters:
// the table pads every row to its widest cell, so a concat of 20,000 inputs made 2.6 GB of text.
// The JSON lists them all.
std::string inputs_text(const Graph& g, const GraphLayer& l, std::size_t width = 0) {
  std::string s;
  for (std::size_t i = 0; i < l.inputs.size(); ++i) {
    std::string name = g.layers[l.inputs[i]].name();
    if (width > 0) name = cut_text(name, width);
    if (width > 0 && i > 0 && s.size() + 1 + name.size() > width)
      return s + fmt::format(",... ({} in all)", l.inputs.size());
    s += (i ? "," : "") + name;
  }
  return s;
}

std::string task_label(const Graph& g, const Task& t) {
  return fmt::format("{}:{}", g.layers[t.layer].name(), task_kind_name(t.kind));
}

// A CSV field as RFC 4180 quotes it: as is, unless it holds a comma, a quote or a line break
// (a layer may be named "conv,1").
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

void write_steps_csv(const std::string& path, const Graph& g, const TaskGraph& tg, const Liveness& lv) {
  std::string csv = "step,phase,task,layer,live_bytes,live_tensors\n";
  for (std::size_t s = 0; s < lv.steps.size(); ++s) {
    const Task& t = tg.tasks[lv.steps[s]];
    csv += fmt::format("{},{},{},{},{},{}\n", s, t.kind == TaskKind::Forward ? "forward" : "backward",
                       task_kind_name(t.kind), csv_field(g.layers[t.layer].name()), lv.live_bytes[s], lv.live_count[s]);
  }
  write_file_atomically(path, csv);
}

}  // namespace

int run_inspect(const InspectOptions& o) {
  std::string path = resolve_network_path(o.network);
  check_outputs({{"--csv-steps", o.csv_steps}}, {{"the network", path}});
  Graph g = build_graph(load_network(path), path, parse_precision_option(o.precision));
  TaskGraph tg = build_tasks(g, construct_route(g));
  Liveness lv = compute_liveness(tg, o.batch);
  LowerBound lb = memory_lower_bound(tg, 1);
  LowerBound at_batch = memory_lower_bound(tg, o.batch);
  if (!o.csv_steps.empty()) write_steps_csv(o.csv_steps, g, tg, lv);

  double flops = 0;
  for (const auto& l : g.layers)
    flops += (l.forward_flops + l.backward_data_flops + l.backward_filter_flops) * static_cast<double>(o.batch);

  if (o.json) {
    OrderedJson j;
    j["network"] = g.net.name;
    j["file"] = path;
    j["batch"] = o.batch;
    if (g.precision != Precision::FP32) j["precision"] = precision_name(g.precision);
    OrderedJson layers = OrderedJson::array();
    for (int l : tg.route) {
      const auto& gl = g.layers[l];
      layers.push_back({{"name", gl.name()},
                        {"type", layer_type_name(gl.type())},
                        {"inputs", inputs_text(g, gl)},
                        {"output", {gl.out.c, gl.out.h, gl.out.w}},
                        {"parameters", gl.params()},
                        {"forward_flops", gl.forward_flops * static_cast<double>(o.batch)},
                        {"activation_bytes", g.out_bytes_per_sample(l) * o.batch}});
    }
    j["layers"] = std::move(layers);
    j["totals"] = {{"parameters", g.total_params()},
                   {"training_flops", flops},
                   {"resident_bytes", lv.resident_bytes},
                   {"baseline_peak_bytes", lv.baseline_peak},
                   {"liveness_peak_bytes", lv.liveness_peak},
                   {"liveness_peak_step", lv.peak_step},
                   {"lower_bound_bytes", lb.bytes},
                   {"lower_bound_task", task_label(g, tg.tasks[lb.task])},
                   {"largest_task_at_batch_bytes", at_batch.bytes}};
    fmt::print("{}", dump_json(j));
    return 0;
  }

  Table table({"#", "layer", "type", "inputs", "output", "params", "fwd FLOPs", "activation"},
              {true, false, false, false, true, true, true, true});
  int row = 0;
  for (int l : tg.route) {
    const auto& gl = g.layers[l];
    table.add({std::to_string(row++), gl.name(), layer_type_name(gl.type()), inputs_text(g, gl, 60), shape_text(gl.out),
               with_thousands(gl.params()), format_flops(gl.forward_flops * static_cast<double>(o.batch)),
               format_bytes(g.out_bytes_per_sample(l) * o.batch)});
  }
  fmt::print("{} ({}), batch {}: layers in execution order (SuperNeurons Alg. 1)\n", g.net.name, path, o.batch);
  if (g.precision != Precision::FP32)
    fmt::print(
        "precision {}: activations and their gradients {} ({} bytes), weights, their gradients and bn "
        "statistics float32{}\n",
        precision_name(g.precision), storage_name(storage_of(g.precision)), storage_bytes(storage_of(g.precision)),
        low_precision_storage(g.precision) ? " (+ a copy of conv and fc weights in the storage type)" : "");
  fmt::print("{}", table.str());
  const Task& lbt = tg.tasks[lb.task];
  const Task& pk = tg.tasks[lv.steps[lv.peak_step]];
  fmt::print("\nparameters                 {} ({} with their gradients)\n", with_thousands(g.total_params()),
             format_bytes(lv.resident_bytes));
  fmt::print("training FLOPs / iteration {}\n", format_flops(flops));
  fmt::print("baseline peak              {}  (every tensor allocated separately: Σl^f + Σl^b)\n",
             format_bytes(lv.baseline_peak));
  // The peak and the totals above count tensors' own bytes (the network's, as a framework holds
  // them: the scale of --budget N%); the task sizes below count each buffer as the arena places it,
  // rounded up to 256 bytes, which on a small network can be more than the peak.
  fmt::print("liveness peak              {}  (at step {}, {}; tensors' own bytes, the scale of --budget N%)\n",
             format_bytes(lv.liveness_peak), lv.peak_step, task_label(g, pk));
  fmt::print(
      "largest task at batch {:<4} {}  (weights + one task's tensors, no sub-batching; each buffer aligned to "
      "256 B as the arena places it)\n",
      o.batch, format_bytes(at_batch.bytes));
  fmt::print("lower bound                {}  (moDNN Eq. 2: weights + {} at sub-batch 1)\n", format_bytes(lb.bytes),
             task_label(g, lbt));
  return 0;
}

}  // namespace ucplan
