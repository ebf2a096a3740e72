#include "pipeline.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "conv_config.h"
#include "costs.h"
#include "liveness.h"
#include "lower_bound.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/sha256.h"
#include "planner/model/units.h"
#include "route.h"
#include "schedule.h"
#include "sub_batch.h"
#include "verify.h"

namespace ucplan {

std::vector<std::string> dump_stage_names() {
  return {"graph", "liveness", "lower-bound", "sub-batch", "conv-configs", "schedule"};
}

WorkspaceOption parse_workspace_option(const std::string& text) {
  WorkspaceOption w;
  if (text == "dynamic") return w;
  auto colon = text.find(':');
  std::string kind = text.substr(0, colon);
  if (colon == std::string::npos || (kind != "wr" && kind != "wd"))
    throw UserError("", "--workspace", fmt::format("expected dynamic, wr:SIZE or wd:SIZE, got \"{}\"", text));
  auto bytes = parse_bytes(text.substr(colon + 1));
  if (!bytes)
    throw UserError("", "--workspace",
                    fmt::format("\"{}\" is not a size with a unit (e.g. 64MiB)", text.substr(colon + 1)));
  w.kind = kind == "wr" ? WorkspaceOption::Kind::WR : WorkspaceOption::Kind::WD;
  w.bytes = *bytes;
  return w;
}

namespace {

std::string task_label(const Graph& g, const Task& t) {
  return fmt::format("{}:{}", g.layers[t.layer].name(), task_kind_name(t.kind));
}

// WR / WD: one configuration per conv kernel of the round, fixed before scheduling.
std::vector<int> fixed_configs(const WorkspaceOption& w, const Graph& g, const TaskGraph& tg, const CostTable& ct) {
  if (w.kind == WorkspaceOption::Kind::Dynamic) return {};
  std::vector<int> fixed(tg.tasks.size(), -1);
  std::vector<int> conv_tasks;
  for (const Task& t : tg.tasks)
    if (t.round_task && t.conv_kernel) conv_tasks.push_back(t.id);
  if (w.kind == WorkspaceOption::Kind::WR) {
    for (int id : conv_tasks) {
      const auto& front = ct.tasks[id].front;
      auto best = fastest_within(front, w.bytes);
      if (!best)
        throw UserError("", "--workspace",
                        fmt::format("{} needs at least {} of workspace at sub-batch {}, more than the WR limit {}",
                                    task_label(g, tg.tasks[id]), format_bytes(front.front().workspace_bytes),
                                    ct.sub_batch, format_bytes(w.bytes)));
      for (std::size_t i = 0; i < front.size(); ++i)
        if (front[i].time_ns == best->time_ns && front[i].workspace_bytes == best->workspace_bytes)
          fixed[id] = static_cast<int>(i);
    }
    return fixed;
  }
  std::vector<std::vector<ConvConfig>> fronts;
  for (int id : conv_tasks) fronts.push_back(ct.tasks[id].front);
  auto sol = solve_wd(fronts, w.bytes);
  if (!sol) {
    std::int64_t least = 0;
    for (const auto& f : fronts) least += f.front().workspace_bytes;
    throw UserError("", "--workspace",
                    fmt::format("the WD total {} is below what the kernels need together at sub-batch {} ({})",
                                format_bytes(w.bytes), ct.sub_batch, format_bytes(least)));
  }
  for (std::size_t k = 0; k < conv_tasks.size(); ++k) fixed[conv_tasks[k]] = sol->choice[k];
  return fixed;
}

std::string workspace_policy_text(const WorkspaceOption& w, const std::string& strategy) {
  switch (w.kind) {
    case WorkspaceOption::Kind::WR:
      return fmt::format("WR: per kernel, the fastest configuration with workspace <= {} (mu-cuDNN §III-B)",
                         format_bytes(w.bytes));
    case WorkspaceOption::Kind::WD:
      return fmt::format(
          "WD: 0-1 ILP over all kernels, total workspace <= {}, each kernel owning a segment (mu-cuDNN §III-C)",
          format_bytes(w.bytes));
    case WorkspaceOption::Kind::Dynamic:
      break;
  }
  if (strategy == "ucplan")
    return "dynamic: per step, the configuration of greatest gain over its Pareto front (moDNN Eq. 5; workspace is "
           "transient, "
           "one compute stream)";
  return "dynamic: per step, the fastest configuration that fits in free memory (SuperNeurons §3.5)";
}

// Unlimited memory and the fastest configurations: every task once per round at its fastest,
// at whichever sub-batch size makes that least (on a CPU, small sub-batches can be faster per
// sample). Nothing a plan does can beat it: a round's compute stream runs every task at least
// this fast, one after another.
std::int64_t ideal_ns(const TaskGraph& tg, const std::map<std::int64_t, CostTable>& tables, std::int64_t batch) {
  std::int64_t best = INT64_MAX;
  for (const auto& [b, ct] : tables) {
    std::int64_t round = 0, final = 0;
    for (const Task& t : tg.tasks) (t.round_task ? round : final) += ct.tasks[t.id].time_ns;
    best = std::min(best, batch / b * round + final);
  }
  return best;
}

OrderedJson graph_json(const Graph& g, const TaskGraph& tg) {
  OrderedJson layers = OrderedJson::array();
  for (int l : tg.route) {
    const auto& gl = g.layers[l];
    layers.push_back({{"name", gl.name()},
                      {"type", layer_type_name(gl.type())},
                      {"output", {gl.out.c, gl.out.h, gl.out.w}},
                      {"parameters", gl.params()},
                      {"forward_flops_per_sample", gl.forward_flops},
                      {"activation_bytes_per_sample", g.out_bytes_per_sample(l)},
                      {"signature", layer_signature(g, l)}});
  }
  OrderedJson tensors = OrderedJson::array();
  for (const auto& t : tg.tensors)
    tensors.push_back({{"name", t.name},
                       {"kind", tensor_kind_name(t.kind)},
                       {"bytes_per_sample", t.bytes_per_sample},
                       {"fixed_bytes", t.fixed_bytes}});
  OrderedJson tasks = OrderedJson::array();
  for (const auto& t : tg.tasks) {
    auto names = [&](const std::vector<int>& v) {
      std::vector<std::string> out;
      for (int i : v) out.push_back(tg.tensors[i].name);
      return out;
    };
    tasks.push_back({{"task", task_label(g, t)},
                     {"reads", names(t.reads)},
                     {"writes", names(t.writes)},
                     {"accumulates", names(t.accumulates)}});
  }
  return {{"stage", "graph"}, {"layers", layers}, {"tensors", tensors}, {"tasks", tasks}};
}

}  // namespace

CompileResult make_plan(const CompileInput& in) {
  CompileResult out;
  const Profile& profile = in.profile;
  const std::int64_t batch = in.batch > 0 ? in.batch : profile.batch;
  const auto names = strategy_names();
  if (std::find(names.begin(), names.end(), in.strategy) == names.end())
    throw UserError(
        "", "--strategy",
        fmt::format("unknown strategy \"{}\" (ucplan, keep-all, vdnn-all, vdnn-conv, superneurons, checkpoint-sqrt)",
                    in.strategy));
  if (in.solver != "default" && in.solver != "exact")
    throw UserError("", "--solver", fmt::format("expected default or exact, got \"{}\"", in.solver));
  if (in.solver == "exact" && in.strategy != "ucplan")
    throw UserError("", "--solver", fmt::format("exact mode plans with the ucplan strategy, not {}", in.strategy));
  if (!(in.solver_time_limit_s >= 0) || in.solver_time_limit_s > 1e6)
    throw UserError("", "--time-limit",
                    fmt::format("{} s is not a time limit (0 for none, at most 10^6 s)", in.solver_time_limit_s));
  const WorkspaceOption ws = parse_workspace_option(in.workspace);
  if (in.precision != profile.precision)
    throw UserError(in.profile_path, "precision",
                    fmt::format("the profile is at {}, the plan asked for --precision {}: profile the network at {} "
                                "(ucplan profile ... --precision {})",
                                precision_name(profile.precision), precision_name(in.precision),
                                precision_name(in.precision), precision_name(in.precision)));
  const std::string loss_scale = in.loss_scale.empty() ? default_loss_scale(in.precision) : in.loss_scale;
  if (const std::string why = loss_scale_error(loss_scale); !why.empty()) throw UserError("", "--loss-scale", why);
  if (!valid_sizes_policy(in.micro_batches))
    throw UserError("", "--micro-batches",
                    fmt::format("expected all, powerOfTwo or undivided, got \"{}\"", in.micro_batches));
  if (!in.dump_after.empty()) {
    auto stages = dump_stage_names();
    if (std::find(stages.begin(), stages.end(), in.dump_after) == stages.end())
      throw UserError(
          "", "--dump-after",
          fmt::format("unknown stage \"{}\" (graph, liveness, lower-bound, sub-batch, conv-configs, schedule)",
                      in.dump_after));
  }

  // 1-2. Graph, route (SuperNeurons Alg. 1), tasks (moDNN's TDFG).
  const Graph g = build_graph(in.network, in.network_file, in.precision);
  const TaskGraph tg = build_tasks(g, construct_route(g));
  if (in.dump_after == "graph") out.dump = dump_json(graph_json(g, tg));

  // 3. Liveness (SuperNeurons §3.2).
  const Liveness lv = compute_liveness(tg, batch);
  if (in.dump_after == "liveness")
    out.dump = dump_json(OrderedJson{{"stage", "liveness"},
                                     {"batch", batch},
                                     {"baseline_peak_bytes", lv.baseline_peak},
                                     {"liveness_peak_bytes", lv.liveness_peak},
                                     {"peak_step", lv.peak_step},
                                     {"live_bytes", lv.live_bytes}});

  // 4. Lower bound (moDNN Eq. 2).
  const LowerBound lb = memory_lower_bound(tg, 1);
  if (in.dump_after == "lower-bound")
    out.dump = dump_json(OrderedJson{{"stage", "lower-bound"},
                                     {"bytes", lb.bytes},
                                     {"resident_bytes", lb.resident_bytes},
                                     {"max_task_bytes", lb.max_task_bytes},
                                     {"task", task_label(g, tg.tasks[lb.task])}});
  if (in.budget_bytes < lb.bytes)
    throw UserError(
        "", "--budget",
        fmt::format("{} is below the memory lower bound of {} for {} (moDNN Eq. 2: weights and their gradients {} "
                    "+ the largest task, {}, at sub-batch 1: {})",
                    format_bytes(in.budget_bytes), format_bytes(lb.bytes), g.net.name, format_bytes(lb.resident_bytes),
                    task_label(g, tg.tasks[lb.task]), format_bytes(lb.max_task_bytes)));

  // 5. Sub-batch candidates and moDNN Eq. (3).
  const std::vector<std::int64_t> costable = costable_sub_batches(profile, batch);
  if (costable.empty())
    throw UserError(in.profile_path, "sizes",
                    fmt::format("no measured micro-batch size divides the batch {} (profile at this batch)", batch));
  const std::vector<std::int64_t> cands = sub_batch_candidates({in.sub_batch, g.has_batch_norm()}, costable, batch);
  std::map<std::int64_t, CostTable> tables;
  for (auto b : costable) tables.emplace(b, build_cost_table(g, tg, profile, in.profile_path, b, in.micro_batches));
  std::map<std::int64_t, CostTable> cand_tables;
  for (auto b : cands) cand_tables.emplace(b, tables.at(b));
  const std::int64_t modnn_b = modnn_sub_batch(tg, cand_tables, in.budget_bytes);
  if (in.dump_after == "conv-configs") {
    OrderedJson kernels = OrderedJson::array();
    const CostTable& ct = tables.rbegin()->second;
    for (const Task& t : tg.tasks) {
      if (!t.conv_kernel || !t.round_task) continue;
      OrderedJson front = OrderedJson::array();
      for (const auto& c : ct.tasks[t.id].front) {
        OrderedJson micro = OrderedJson::array();
        for (const auto& m : c.micro) micro.push_back(OrderedJson::array({m.algo, m.micro_batch}));
        front.push_back({{"time_ns", c.time_ns}, {"workspace_bytes", c.workspace_bytes}, {"config", micro}});
      }
      kernels.push_back({{"kernel", task_label(g, t)}, {"sub_batch", ct.sub_batch}, {"front", front}});
    }
    out.dump = dump_json(OrderedJson{{"stage", "conv-configs"}, {"kernels", kernels}});
  }

  // 6. Schedule every candidate; keep the fastest predicted plan.
  ScheduleResult best;
  std::int64_t best_b = 0, best_total = 0;
  std::string last_failure;
  for (auto b : cands) {
    const CostTable& ct = tables.at(b);
    CandidateOutcome o;
    o.sub_batch = b;
    const std::int64_t rounds = batch / b;
    const std::int64_t need = min_plan_bytes(tg, ct);
    if (need > in.budget_bytes) {
      o.why = fmt::format("needs at least {} at this sub-batch", format_bytes(need));
      out.candidates.push_back(o);
      continue;
    }
    // A candidate whose ideal time cannot beat the best plan found is skipped.
    std::int64_t floor_round = 0, floor_final = 0;
    for (const Task& t : tg.tasks) (t.round_task ? floor_round : floor_final) += ct.tasks[t.id].time_ns;
    if (best.ok && rounds * floor_round + floor_final >= best_total) {
      o.why = fmt::format("cannot beat sub-batch {}: its ideal time is already {}", best_b,
                          format_ns(rounds * floor_round + floor_final));
      out.candidates.push_back(o);
      continue;
    }
    ScheduleInput si;
    si.graph = &g;
    si.tasks = &tg;
    si.costs = &ct;
    si.budget_bytes = in.budget_bytes;
    si.batch = batch;
    si.fixed_config = fixed_configs(ws, g, tg, ct);
    ScheduleResult r;
    if (in.strategy == "ucplan" && in.solver == "exact") {
      // Exact mode: the default search first; its table is the MILP's first incumbent; the MILP's
      // solution then leads the seeds of a second search with ten times the local-search work.
      // The faster of the two plans is kept, so exact mode is never slower than the default.
      std::vector<Residency> table;
      r = schedule_ucplan(si, &table);
      o.milp = true;
      o.milp_result =
          solve_remat_milp(g, tg, ct, in.budget_bytes, in.solver_time_limit_s, r.ok ? table : std::vector<Residency>{});
      if (!o.milp_result.table.empty()) {
        si.extra_seeds.push_back(o.milp_result.table);
        si.local_search_budget *= 10;
        ScheduleResult seeded = schedule_ucplan(si);
        if (seeded.ok && (!r.ok || seeded.round_ns < r.round_ns)) {
          seeded.search_log.insert(
              seeded.search_log.begin(),
              {"(the default search alone: " + format_ns(r.round_ns) + " per round)", r.round_ns, ""});
          r = std::move(seeded);
        }
      }
    } else if (in.strategy == "ucplan") {
      r = schedule_ucplan(si);
    } else {
      auto strategy = make_baseline_strategy(in.strategy, g, tg, ct);
      r = simulate_schedule(si, *strategy);
    }
    o.ok = r.ok;
    o.why = r.failure;
    o.search = r.search_log;
    o.predicted_ns = rounds * r.round_ns + r.final_ns;
    out.candidates.push_back(o);
    if (!r.ok) {
      last_failure = fmt::format("at sub-batch {}: {}", b, r.failure);
      continue;
    }
    if (!best.ok || o.predicted_ns < best_total) {
      best = std::move(r);
      best_b = b;
      best_total = o.predicted_ns;
    }
  }
  if (in.dump_after == "sub-batch") {
    OrderedJson c = OrderedJson::array();
    for (const auto& o : out.candidates)
      c.push_back({{"sub_batch", o.sub_batch}, {"ok", o.ok}, {"predicted_ns", o.predicted_ns}, {"why", o.why}});
    out.dump = dump_json(OrderedJson{{"stage", "sub-batch"},
                                     {"costable", costable},
                                     {"candidates", cands},
                                     {"modnn_eq3", modnn_b},
                                     {"outcomes", c}});
  }
  if (!best.ok) {
    std::string hint;
    if (g.has_batch_norm() && in.sub_batch == "auto" && costable.size() > 1)
      hint = " (the network has batch-norm, so it is not split into sub-batches unless you pass --sub-batch any or N)";
    std::string why = last_failure.empty() ? fmt::format("at sub-batch {}: {}", out.candidates.back().sub_batch,
                                                         out.candidates.back().why)
                                           : last_failure;
    throw UserError("", "--budget",
                    fmt::format("strategy {} finds no plan for {} at batch {} within {}: {}{}", in.strategy, g.net.name,
                                batch, format_bytes(in.budget_bytes), why, hint));
  }

  // 7. The plan.
  Plan& p = out.plan;
  p.generator = std::string("ucplan ") + UCPLAN_VERSION;
  p.network = in.network;
  p.network_sha256 = sha256_hex(network_to_json_text(in.network));
  p.profile_path = in.profile_path;
  p.profile_sha256 = in.profile_sha256;
  p.profile_source = profile.source;
  p.device = profile.device.name;
  p.batch = batch;
  p.budget_bytes = in.budget_bytes;
  p.strategy = in.strategy;
  p.sub_batch_option = in.sub_batch;
  p.workspace_option = in.workspace;
  p.micro_batches = in.micro_batches;
  p.solver = in.solver;
  p.precision = in.precision;
  p.loss_scale = loss_scale;
  p.solver_time_limit_ms = std::llround(in.solver_time_limit_s * 1000);
  p.sub_batch = best_b;
  p.rounds = batch / best_b;
  p.modnn_sub_batch = modnn_b;
  p.sub_batch_changes_statistics = g.has_batch_norm() && p.rounds > 1;
  p.workspace_policy = workspace_policy_text(ws, in.strategy);
  p.arena_bytes = best.arena_bytes;
  p.buffers = std::move(best.buffers);
  p.host_buffers = std::move(best.host_buffers);
  p.steps = std::move(best.steps);
  p.kernels = std::move(best.kernels);
  PlanSummary& s = p.summary;
  s.round_ns = best.round_ns;
  s.final_ns = best.final_ns;
  s.predicted_ns = p.rounds * best.round_ns + best.final_ns;
  s.ideal_ns = ideal_ns(tg, tables, batch);
  s.peak_bytes = best.arena_bytes;
  s.lower_bound_bytes = lb.bytes;
  s.offload_bytes = p.rounds * best.offload_bytes;
  s.prefetch_bytes = p.rounds * best.prefetch_bytes;
  s.input_bytes = p.rounds * best.input_bytes;
  s.recompute_ns = p.rounds * best.recompute_ns;
  s.recompute_steps = best.recompute_steps;
  s.workspace_peak_bytes = best.workspace_peak_bytes;
  if (!profile.measured())
    p.notes.push_back("times are predicted from a modelled profile (" + profile.source + "), not measured");
  if (p.sub_batch_changes_statistics)
    p.notes.push_back(fmt::format(
        "batch-norm statistics are computed per sub-batch of {} samples ({} rounds), as asked with --sub-batch",
        p.sub_batch, p.rounds));
  if (best.candidates_skipped > 0)
    p.notes.push_back(
        fmt::format("the ucplan search stopped {} candidate(s) short: its work budget was spent (large network)",
                    best.candidates_skipped));
  for (const CandidateOutcome& o : out.candidates) {
    if (!o.milp || o.sub_batch != best_b) continue;
    const RematMilpResult& m = o.milp_result;
    if (m.status == RematMilpResult::Status::optimal || m.status == RematMilpResult::Status::feasible) {
      const std::int64_t bound = p.rounds * m.bound_round_ns + best.final_ns;
      p.notes.push_back(
          fmt::format("exact mode: the rematerialisation MILP ({} variables, {} rows) is {}; no recompute-only plan in "
                      "route order can "
                      "take less than {} ({} over the ideal); this plan is {} over that bound{}",
                      m.variables, m.rows, remat_milp_status_name(m.status), format_ns(bound),
                      format_percent(static_cast<double>(bound - s.ideal_ns) / static_cast<double>(s.ideal_ns)),
                      format_percent(static_cast<double>(s.predicted_ns - bound) / static_cast<double>(bound)),
                      s.offload_bytes > 0 ? " (it also offloads, which the MILP does not model)" : ""));
    } else {
      p.notes.push_back(fmt::format("exact mode: the rematerialisation MILP ({} variables, {} rows) found {}",
                                    m.variables, m.rows, remat_milp_status_name(m.status)));
    }
  }
  if (best.defragmentations > 0)
    p.notes.push_back(
        fmt::format("{} defragmentation(s) per round: the budget is close to the bound", best.defragmentations));
  if (in.dump_after == "schedule") out.dump = plan_to_json_text(p);

  // 8. Verify (independent re-simulation). A failure here is a planner bug, not a user error.
  const std::string error = find_plan_error(p);
  UCPLAN_CHECK(error.empty(), "the planner produced a plan its checker rejects: " + error);
  return out;
}

}  // namespace ucplan
