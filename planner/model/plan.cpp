#include "plan.h"

#include <fmt/format.h>

#include "errors.h"
#include "json_util.h"
#include "network_json.h"

namespace ucplan {

namespace {

OrderedJson micro_json(const std::vector<MicroStep>& config) {
  OrderedJson a = OrderedJson::array();
  for (const auto& m : config) a.push_back(OrderedJson::array({m.algo, m.batch}));
  return a;
}

std::vector<MicroStep> read_micro(const JsonReader& r) {
  std::vector<MicroStep> out;
  for (const auto& e : r.array()) {
    auto pair = e.array(2, 2);
    out.push_back({pair[0].string(), pair[1].integer(1, INT64_MAX)});
  }
  return out;
}

std::vector<int> read_ids(const JsonReader& r, std::string_view key) {
  std::vector<int> out;
  if (auto f = r.find(key))
    for (const auto& e : f->array()) out.push_back(static_cast<int>(e.integer(0, INT32_MAX)));
  return out;
}

OrderedJson step_json(const PlanStep& s) {
  OrderedJson j;
  j["id"] = s.id;
  j["stream"] = stream_name(s.stream);
  j["op"] = step_op_name(s.op);
  if (!s.layer.empty()) j["layer"] = s.layer;
  if (!s.tensor.empty()) j["tensor"] = s.tensor;
  if (!s.waits.empty()) j["waits"] = s.waits;
  if (!s.reads.empty()) j["reads"] = s.reads;
  if (!s.writes.empty()) j["writes"] = s.writes;
  if (!s.accumulates.empty()) j["accumulates"] = s.accumulates;
  if (s.workspace >= 0) j["workspace"] = s.workspace;
  if (s.host >= 0) j["host"] = s.host;
  if (!s.config.empty()) j["config"] = micro_json(s.config);
  if (s.config_workspace_bytes >= 0) j["config_workspace_bytes"] = s.config_workspace_bytes;
  j["start_ns"] = s.start_ns;
  j["end_ns"] = s.end_ns;
  if (s.final) j["final"] = true;
  if (s.ahead) j["ahead"] = true;
  return j;
}

}  // namespace

std::string plan_to_json_text(const Plan& p) {
  OrderedJson j;
  j["format"] = "ucplan-plan/1";
  j["generator"] = p.generator;
  j["inputs"] = {{"network_sha256", p.network_sha256},
                 {"profile", p.profile_path},
                 {"profile_sha256", p.profile_sha256},
                 {"profile_source", p.profile_source},
                 {"device", p.device}};
  j["options"] = {{"batch", p.batch},
                  {"budget_bytes", p.budget_bytes},
                  {"strategy", p.strategy},
                  {"sub_batch", p.sub_batch_option},
                  {"workspace", p.workspace_option},
                  {"micro_batches", p.micro_batches}};
  if (p.solver != "default") {  // absent for the default, so plans made before exact mode stay as they were
    j["options"]["solver"] = p.solver;
    j["options"]["solver_time_limit_ms"] = p.solver_time_limit_ms;
  }
  if (p.offload != "allowed") j["options"]["offload"] = p.offload;  // absent when allowed, as before the option
  if (p.precision != Precision::FP32) {                             // absent at fp32, so FP32 plans stay as they were
    j["options"]["precision"] = precision_name(p.precision);
    j["options"]["loss_scale"] = p.loss_scale;
  }
  OrderedJson s;
  s["predicted_ns"] = p.summary.predicted_ns;
  s["round_ns"] = p.summary.round_ns;
  s["final_ns"] = p.summary.final_ns;
  s["ideal_ns"] = p.summary.ideal_ns;
  s["peak_bytes"] = p.summary.peak_bytes;
  s["lower_bound_bytes"] = p.summary.lower_bound_bytes;
  s["offload_bytes"] = p.summary.offload_bytes;
  s["prefetch_bytes"] = p.summary.prefetch_bytes;
  s["input_bytes"] = p.summary.input_bytes;
  s["recompute_ns"] = p.summary.recompute_ns;
  s["recompute_steps"] = p.summary.recompute_steps;
  s["workspace_peak_bytes"] = p.summary.workspace_peak_bytes;
  j["summary"] = std::move(s);
  j["sub_batch"] = p.sub_batch;
  j["rounds"] = p.rounds;
  j["modnn_sub_batch"] = p.modnn_sub_batch;
  j["sub_batch_changes_statistics"] = p.sub_batch_changes_statistics;
  j["workspace_policy"] = p.workspace_policy;
  j["notes"] = p.notes;
  OrderedJson kernels = OrderedJson::array();
  for (const auto& k : p.kernels)
    kernels.push_back({{"layer", k.layer},
                       {"op", step_op_name(k.op)},
                       {"config", micro_json(k.config)},
                       {"workspace_bytes", k.workspace_bytes},
                       {"time_ns", k.time_ns},
                       {"undivided_ns", k.undivided_ns},
                       {"fastest_ns", k.fastest_ns},
                       {"baseline_ns", k.baseline_ns}});
  j["kernels"] = std::move(kernels);
  j["arena_bytes"] = p.arena_bytes;
  OrderedJson buffers = OrderedJson::array();
  for (const auto& b : p.buffers) {
    OrderedJson bj = {{"id", b.id},     {"tensor", b.tensor},         {"offset", b.offset},
                      {"size", b.size}, {"first_step", b.first_step}, {"last_step", b.last_step}};
    if (b.resident) bj["resident"] = true;
    if (b.carried) bj["carried"] = true;
    buffers.push_back(std::move(bj));
  }
  j["buffers"] = std::move(buffers);
  OrderedJson hosts = OrderedJson::array();
  for (const auto& h : p.host_buffers) {
    OrderedJson hj = {{"id", h.id}, {"tensor", h.tensor}, {"size", h.size}};
    if (h.input) hj["input"] = true;
    hosts.push_back(std::move(hj));
  }
  j["host_buffers"] = std::move(hosts);
  OrderedJson steps = OrderedJson::array();
  for (const auto& st : p.steps) steps.push_back(step_json(st));
  j["steps"] = std::move(steps);
  j["network"] = network_to_json(p.network);
  return dump_json(j);
}

Plan load_plan(const std::string& path) {
  Json root = load_json_file(path);
  JsonReader r(root, path, "");
  r.expect_format("plan");
  r.allow_only({"format", "generator", "inputs", "options", "summary", "sub_batch", "rounds", "modnn_sub_batch",
                "sub_batch_changes_statistics", "workspace_policy", "notes", "kernels", "arena_bytes", "buffers",
                "host_buffers", "steps", "network"});
  Plan p;
  p.generator = r.at("generator").string();
  auto in = r.at("inputs");
  in.allow_only({"network_sha256", "profile", "profile_sha256", "profile_source", "device"});
  p.network_sha256 = in.at("network_sha256").string();
  p.profile_path = in.at("profile").string();
  p.profile_sha256 = in.at("profile_sha256").string();
  p.profile_source = in.at("profile_source").string();
  p.device = in.at("device").string();
  auto o = r.at("options");
  o.allow_only({"batch", "budget_bytes", "strategy", "sub_batch", "workspace", "micro_batches", "solver",
                "solver_time_limit_ms", "offload", "precision", "loss_scale"});
  p.batch = o.at("batch").integer(1, kMaxBatch);
  p.budget_bytes = o.at("budget_bytes").integer(1, INT64_MAX);
  p.strategy = o.at("strategy").string();
  p.sub_batch_option = o.at("sub_batch").string();
  p.workspace_option = o.at("workspace").string();
  p.micro_batches = o.at("micro_batches").string();
  if (o.has("solver")) {
    p.solver = o.at("solver").string();
    if (p.solver != "fast" && p.solver != "default" && p.solver != "thorough" && p.solver != "exact")
      o.at("solver").fail("expected \"fast\", \"default\", \"thorough\" or \"exact\", got \"" + p.solver + "\"");
    p.solver_time_limit_ms = o.has("solver_time_limit_ms") ? o.at("solver_time_limit_ms").integer(0, INT64_MAX) : 0;
  }
  if (o.has("offload")) {
    p.offload = o.at("offload").string();
    if (p.offload != "allowed" && p.offload != "never")
      o.at("offload").fail("expected \"allowed\" or \"never\", got \"" + p.offload + "\"");
  }
  if (o.has("precision") && !parse_precision(o.at("precision").string(), &p.precision))
    o.at("precision").fail(fmt::format("must be {}, got \"{}\"", precision_choices(), o.at("precision").string()));
  if (o.has("loss_scale")) {
    p.loss_scale = o.at("loss_scale").string();
    if (const std::string why = loss_scale_error(p.loss_scale); !why.empty()) o.at("loss_scale").fail(why);
  }
  auto s = r.at("summary");
  s.allow_only({"predicted_ns", "round_ns", "final_ns", "ideal_ns", "peak_bytes", "lower_bound_bytes", "offload_bytes",
                "prefetch_bytes", "input_bytes", "recompute_ns", "recompute_steps", "workspace_peak_bytes"});
  auto nn = [&](const char* k) { return s.at(k).integer(0, INT64_MAX); };
  p.summary.predicted_ns = nn("predicted_ns");
  p.summary.round_ns = nn("round_ns");
  p.summary.final_ns = nn("final_ns");
  p.summary.ideal_ns = nn("ideal_ns");
  p.summary.peak_bytes = nn("peak_bytes");
  p.summary.lower_bound_bytes = nn("lower_bound_bytes");
  p.summary.offload_bytes = nn("offload_bytes");
  p.summary.prefetch_bytes = nn("prefetch_bytes");
  p.summary.input_bytes = nn("input_bytes");
  p.summary.recompute_ns = nn("recompute_ns");
  p.summary.recompute_steps = nn("recompute_steps");
  p.summary.workspace_peak_bytes = nn("workspace_peak_bytes");
  p.sub_batch = r.at("sub_batch").integer(1, p.batch);
  p.rounds = r.at("rounds").integer(1, p.batch);
  p.modnn_sub_batch = r.at("modnn_sub_batch").integer(0, p.batch);
  p.sub_batch_changes_statistics = r.at("sub_batch_changes_statistics").boolean();
  p.workspace_policy = r.at("workspace_policy").string();
  for (const auto& n : r.at("notes").array()) p.notes.push_back(n.string());
  for (const auto& k : r.at("kernels").array()) {
    k.allow_only({"layer", "op", "config", "workspace_bytes", "time_ns", "undivided_ns", "fastest_ns", "baseline_ns"});
    PlanKernel pk;
    pk.layer = k.at("layer").string();
    const std::string op = k.at("op").string();
    if (!parse_step_op(op, &pk.op) ||
        (pk.op != StepOp::Forward && pk.op != StepOp::BackwardData && pk.op != StepOp::BackwardFilter))
      k.at("op").fail(fmt::format("\"{}\" is not a convolution op (forward, backward_data, backward_filter)", op));
    pk.config = read_micro(k.at("config"));
    pk.workspace_bytes = k.at("workspace_bytes").integer(0, INT64_MAX);
    pk.time_ns = k.at("time_ns").integer(0, INT64_MAX);
    pk.undivided_ns = k.at("undivided_ns").integer(0, INT64_MAX);
    pk.fastest_ns = k.integer_or("fastest_ns", 0, 0, INT64_MAX);  // absent in plans made before it was recorded
    pk.baseline_ns = k.at("baseline_ns").integer(0, INT64_MAX);
    p.kernels.push_back(std::move(pk));
  }
  p.arena_bytes = r.at("arena_bytes").integer(0, INT64_MAX);
  for (const auto& b : r.at("buffers").array()) {
    b.allow_only({"id", "tensor", "offset", "size", "first_step", "last_step", "resident", "carried"});
    PlanBuffer pb;
    pb.id = static_cast<int>(b.at("id").integer(0, INT32_MAX));
    pb.tensor = b.at("tensor").string();
    pb.offset = b.at("offset").integer(0, INT64_MAX);
    pb.size = b.at("size").integer(0, INT64_MAX);
    pb.first_step = static_cast<int>(b.at("first_step").integer(-1, INT32_MAX));
    pb.last_step = static_cast<int>(b.at("last_step").integer(-1, INT32_MAX));
    pb.resident = b.boolean_or("resident", false);
    pb.carried = b.boolean_or("carried", false);
    p.buffers.push_back(std::move(pb));
  }
  for (const auto& h : r.at("host_buffers").array()) {
    h.allow_only({"id", "tensor", "size", "input"});
    PlanHostBuffer ph;
    ph.id = static_cast<int>(h.at("id").integer(0, INT32_MAX));
    ph.tensor = h.at("tensor").string();
    ph.size = h.at("size").integer(0, INT64_MAX);
    ph.input = h.boolean_or("input", false);
    p.host_buffers.push_back(std::move(ph));
  }
  for (const auto& st : r.at("steps").array()) {
    st.allow_only({"id", "stream", "op", "layer", "tensor", "waits", "reads", "writes", "accumulates", "workspace",
                   "host", "config", "config_workspace_bytes", "start_ns", "end_ns", "final", "ahead"});
    PlanStep ps;
    ps.id = static_cast<int>(st.at("id").integer(0, INT32_MAX));
    const std::string stream = st.at("stream").string(), op = st.at("op").string();
    if (!parse_stream(stream, &ps.stream))
      st.at("stream").fail(fmt::format("unknown stream \"{}\" (compute, h2d, d2h)", stream));
    if (!parse_step_op(op, &ps.op))
      st.at("op").fail(fmt::format(
          "unknown op \"{}\" (forward, recompute, backward, backward_data, backward_filter, update, offload, prefetch)",
          op));
    ps.layer = st.string_or("layer", "");
    ps.tensor = st.string_or("tensor", "");
    ps.waits = read_ids(st, "waits");
    ps.reads = read_ids(st, "reads");
    ps.writes = read_ids(st, "writes");
    ps.accumulates = read_ids(st, "accumulates");
    ps.workspace = static_cast<int>(st.integer_or("workspace", -1, -1, INT32_MAX));
    ps.host = static_cast<int>(st.integer_or("host", -1, -1, INT32_MAX));
    if (auto c = st.find("config")) ps.config = read_micro(*c);
    if (auto w = st.find("config_workspace_bytes")) ps.config_workspace_bytes = w->integer(0, INT64_MAX);
    ps.start_ns = st.at("start_ns").integer(0, INT64_MAX);
    ps.end_ns = st.at("end_ns").integer(0, INT64_MAX);
    ps.final = st.boolean_or("final", false);
    ps.ahead = st.boolean_or("ahead", false);
    p.steps.push_back(std::move(ps));
  }
  p.network = network_from_json(r.at("network"));
  return p;
}

}  // namespace ucplan
