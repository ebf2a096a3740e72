#include "pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "conv_config.h"
#include "costs.h"
#include "liveness.h"
#include "lower_bound.h"
#include "offsets.h"
#include "parallel.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/sha256.h"
#include "planner/model/units.h"
#include "planner/ir/route.h"
#include "planner/solve/ilp.h"
#include "search.h"
#include "strategies.h"
#include "sub_batch.h"
#include "planner/check/verify.h"

namespace ucplan {

WorkspaceOption parse_workspace_option(const std::string& text) {
  WorkspaceOption w;
  if (text == "dynamic") return w;
  auto colon = text.find(':');
  std::string kind = text.substr(0, colon);
  if (colon == std::string::npos || (kind != "wr" && kind != "wd"))
    throw UserError("", "--workspace", fmt::format("expected dynamic, wr:SIZE or wd:SIZE, got \"{}\"", text));
  std::string why;
  auto bytes = parse_bytes(text.substr(colon + 1), &why);
  if (!bytes) throw UserError("", "--workspace", size_error(text.substr(colon + 1), why, "64MiB"));
  w.kind = kind == "wr" ? WorkspaceOption::Kind::WR : WorkspaceOption::Kind::WD;
  w.bytes = *bytes;
  w.text = text;
  return w;
}

namespace {

std::string task_label(const Graph& g, const Task& t) {
  return fmt::format("{}:{}", g.layers[t.layer].name(), task_kind_name(t.kind));
}

// WR / WD: one configuration per conv kernel of the round, fixed before scheduling. A WD choice
// that solve_wd could not prove the fastest for the total leaves its time and bound in *wd.
std::vector<int> fixed_configs(const WorkspaceOption& w, const Graph& g, const TaskGraph& tg, const CostTable& ct,
                               std::optional<WdSolution>* wd = nullptr) {
  if (w.kind == WorkspaceOption::Kind::Dynamic) return {};
  std::vector<int> fixed(tg.tasks.size(), -1);
  std::vector<int> conv_tasks;
  for (const Task& t : tg.tasks)
    if (t.round_task && t.conv_kernel) conv_tasks.push_back(t.id);
  if (w.kind == WorkspaceOption::Kind::WR) {
    for (int id : conv_tasks) {
      const auto& front = ct.tasks[id].front;
      auto best = fastest_within(front, w.bytes);
      if (!best) {
        const BytesApart text = format_bytes_apart(front.front().workspace_bytes, w.bytes);
        throw UserError("", "--workspace",
                        fmt::format("{} needs at least {} of workspace at sub-batch {}, more than the WR limit {}",
                                    task_label(g, tg.tasks[id]), text.first, ct.sub_batch, text.second));
      }
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
    const BytesApart text = format_bytes_apart(w.bytes, least);
    throw UserError("", "--workspace",
                    fmt::format("the WD total {} is below what the kernels need together at sub-batch {} ({})",
                                text.first, ct.sub_batch, text.second));
  }
  for (std::size_t k = 0; k < conv_tasks.size(); ++k) fixed[conv_tasks[k]] = sol->choice[k];
  if (wd && !sol->optimal) *wd = sol;
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

namespace {

// What the options must agree with in the profile, checked before the first stage.
void check_against_profile(const CompileInput& in) {
  if (in.precision != in.profile.precision)
    throw UserError(in.profile_path, "precision",
                    fmt::format("the profile is at {}, the plan asked for --precision {}: profile the network at {} "
                                "(ucplan profile ... --precision {})",
                                precision_name(in.profile.precision), precision_name(in.precision),
                                precision_name(in.precision), precision_name(in.precision)));
}

// What the stages hand on to each other.
struct Pipeline {
  explicit Pipeline(const CompileInput& input)
      : in(input), opt(input.options), batch(input.batch > 0 ? input.batch : input.profile.batch) {}
  const CompileInput& in;
  const PlanOptions& opt;
  const std::int64_t batch;  // the whole batch: the command line's or the profile's
  CompileResult out;
  Graph g;
  TaskGraph tg;
  Liveness lv;
  LowerBound lb;
  std::vector<std::int64_t> costable, cands;
  std::map<std::int64_t, CostTable> tables;  // per costable sub-batch
  std::int64_t modnn_b = 0;
  ScheduleResult best;
  std::int64_t best_b = 0;
  double milp_seconds = 0;  // spent by this compile's MILP solves so far
};

// 1-2. Graph, route (SuperNeurons Alg. 1), tasks (moDNN's TDFG).
void build_ir(Pipeline& x) {
  x.g = build_graph(x.in.network, x.in.network_file, x.in.precision);
  x.tg = build_tasks(x.g, construct_route(x.g));
}

// 3. Liveness (SuperNeurons §3.2).
void run_liveness(Pipeline& x) { x.lv = compute_liveness(x.tg, x.batch); }

// 4. Lower bound (moDNN Eq. 2): below it no plan exists.
void run_lower_bound(Pipeline& x) {
  const Graph& g = x.g;
  const TaskGraph& tg = x.tg;
  x.lb = memory_lower_bound(tg, 1);
  const LowerBound& lb = x.lb;
  if (x.in.budget_bytes < lb.bytes) {
    // A profile of another network is the first thing wrong (its costs stage would say so).
    for (int l = 1; l < static_cast<int>(g.layers.size()); ++l) profile_costs_of(g, l, x.in.profile, x.in.profile_path);
    const BytesApart text = format_bytes_apart(x.in.budget_bytes, lb.bytes);
    throw UserError(
        "", "--budget",
        fmt::format("{} is below the memory lower bound of {} for {} (moDNN Eq. 2: weights and their gradients {} "
                    "+ the largest task, {}, at sub-batch 1: {})",
                    text.first, text.second, g.net.name, format_bytes(lb.resident_bytes),
                    task_label(g, tg.tasks[lb.task]), format_bytes(lb.max_task_bytes)));
  }
}

// 5. Costs at every sub-batch the profile can cost: conv Pareto fronts (mu-cuDNN §III-C); the
// sub-batch candidates and moDNN's Eq. (3).
void build_costs(Pipeline& x) {
  const CompileInput& in = x.in;
  const std::int64_t batch = x.batch;
  x.costable = costable_sub_batches(in.profile, batch);
  if (x.costable.empty())
    throw UserError(in.profile_path, "sizes",
                    fmt::format("no measured micro-batch size divides the batch {} (profile at this batch)", batch));
  const std::vector<std::int64_t> wanted =
      sub_batch_candidates(x.opt.sub_batch, x.g.has_batch_norm(), x.costable, batch);
  // A size at which some task has no working measurement (a profile whose larger sizes ran out of
  // memory, on a GPU or on the host) cannot be planned: the others can. Only when every candidate
  // the option allows fails is it an error: the largest's says which layer and why.
  std::map<std::int64_t, UserError> failed;
  std::vector<std::int64_t> costed;
  for (auto b : x.costable) {
    try {
      x.tables.emplace(b, build_cost_table(x.g, x.tg, in.profile, in.profile_path, b, x.opt.micro_batches));
      costed.push_back(b);
    } catch (const UserError& e) {
      failed.emplace(b, e);
    }
  }
  x.costable = costed;
  x.cands.clear();
  for (auto b : wanted)
    if (!failed.contains(b)) x.cands.push_back(b);
  if (x.cands.empty()) throw failed.at(wanted.front());  // candidates run largest first
  std::map<std::int64_t, CostTable> cand_tables;
  for (auto b : x.cands) cand_tables.emplace(b, x.tables.at(b));
  x.modnn_b = modnn_sub_batch(x.tg, cand_tables, in.budget_bytes);
}

// `c`, found after `best` as `name`, replaces it if faster (or if `best` has none). The search
// log keeps every line of both: `best`'s, then `c`'s line, marked "(wins)" if it replaced it.
// Candidates skipped add up, as both searches spent their work.
void keep_faster(ScheduleResult& best, ScheduleResult c, const std::string& name) {
  if (!c.ok || (best.ok && c.round_ns >= best.round_ns)) {
    best.search_log.push_back({name, c.ok ? c.round_ns : 0, c.ok ? "" : c.failure});
    best.candidates_skipped += c.candidates_skipped;
    return;
  }
  c.search_log.insert(c.search_log.begin(), best.search_log.begin(), best.search_log.end());
  c.search_log.push_back({name + " (wins)", c.round_ns, ""});
  c.candidates_skipped += best.candidates_skipped;
  best = std::move(c);
}

// The plan `r` again with the batch's input carried across rounds (ScheduleInput::carry_input):
// the decisions it was found with (`table`, empty if none) simulated again so, in its placement;
// with `refine` (networks under kReferenceLayers), that plan refined stage by stage too; with
// `search` (every compile but --solver fast), one branch of the search seeded with the decisions.
// The fastest replaces `r` if faster than it. Carrying holds the input's slice for the whole
// program, so it is tried as a whole plan rather than as a move of the search: where memory is
// short those bytes are worth more than the wait. The seeded search is not redundant with the
// refinement: without it on networks under kReferenceLayers (cf85362, measured on model:h100
// only), vgg16 b32 at 85 % of the peak on model:v100 was +4.3 % instead of +3.7 % (exact mode
// +3.6 %) and ResNet-20's first stage b64 at 45 % on model:h100 +21.9 % instead of +19.6 %
// (exact mode's plan), for 0.1 s less a compile. On the 10,455-layer ResNet (12 GiB, model:k40)
// its round is 17.2 s, the same decisions carried 17.4 s (the plan +7.5 % instead of +8.8 %).
void try_carrying_input(const ScheduleInput& si, const std::vector<Residency>& table, ScheduleResult& r, bool refine,
                        bool search) {
  if (carriable_inputs(*si.tasks).empty()) return;
  ScheduleInput carry = si;
  carry.carry_input = true;
  auto consider = [&](ScheduleResult c, const std::string& name) { keep_faster(r, std::move(c), name); };
  if (r.ok && !table.empty()) {
    ScheduleInput same = carry;
    same.best_fit = r.best_fit;
    same.two_ended = r.two_ended;
    same.pool_bytes = r.pool_bytes;
    auto strategy = make_table_strategy("ucplan", table, PrefetchMode::Eq4, true, true, si.offload);
    ScheduleResult c = simulate_schedule(same, *strategy);
    c.best_fit = r.best_fit;
    c.two_ended = r.two_ended;
    c.pool_bytes = r.pool_bytes;
    ScheduleResult refined;
    if (c.ok && refine) refined = refine_stages(same, table, c);
    consider(std::move(c), "the batch's input carried across rounds, the same decisions");
    if (refined.ok) consider(std::move(refined), "the batch's input carried across rounds, refined stage by stage");
    // A quick search has no pool branches (search.cpp), so its plan was placed while it was
    // scheduled, and carrying the input, which holds its slice throughout, may then leave no room
    // for the fastest workspace: the same decisions counted in bytes and placed afterwards, with
    // more slack until they fit. Measured (model:h100, resnet20 b64, --solver fast): at the peak
    // of the plan with unlimited memory, 108,947,456 B, +1.1 % (two convs in configurations with
    // less workspace) where that plan, +0.0 %, fits; the frontier's last point was slower than
    // the unlimited plan it names. Not for networks of kReferenceLayers or more (the placement is
    // quadratic in the buffers).
    std::vector<int> shifts{0};  // no slack first (a plan at its own peak), then kPoolSlackShifts
    shifts.insert(shifts.end(), std::begin(kPoolSlackShifts), std::end(kPoolSlackShifts));
    if (si.quick && static_cast<std::int64_t>(si.tasks->route.size()) < kReferenceLayers)
      for (const int shift : shifts) {
        ScheduleInput pooled = carry;
        pooled.pool_bytes = shift == 0 ? si.budget_bytes : ScheduleInput::pool_for(si.budget_bytes, shift);
        ScheduleResult placed = simulate_schedule(pooled, *strategy);
        if (!placed.ok) continue;
        consider(std::move(placed),
                 fmt::format("the batch's input carried across rounds, the same decisions placed after scheduling "
                             "({} at once)",
                             format_bytes(pooled.pool_bytes)));
        break;
      }
  }
  if (!search) return;
  carry.quick = true;
  if (!table.empty()) carry.extra_seeds.push_back({"the plan without the input carried", table});
  consider(schedule_ucplan(carry), "the batch's input carried across rounds, searched again");
}

// The ucplan search, and for a network smaller than ResNet-152 (kReferenceLayers) the search again
// with 1/128 less memory: the faster plan wins (a tie, the first). The search is chaotic in its
// start, so a second start is worth about what twice the local search's work is, and a plan
// never loses to the one the same compile finds for less memory. Measured on 96 points (resnet20,
// vgg16, resnet50 and densenet40 on model:h100 and model:v100 at 100 to 25 % of the peak): the
// overheads sum to 530.4 + 825.8 points instead of 548.8 + 828.9 (the six shares, then
// 90 / 80 / 60 / 45 / 40 / 30 %), 23 plans faster and none slower (resnet50 b64 at 25 % on
// model:v100: +46.4 % instead of +60.8 %), for twice the compile time (136 -> 269 s of CPU for
// the 96). With 1.5 % and 3 % less memory the sums fell by 19 and 11 points; with twice the
// local search's work instead, by 14, some plans slower. A quick search (the report's estimates)
// runs once. Two more searches, with 1/64 and 1/24 less memory, were tried against the budgets
// that part C of optimality.py finds slower than a smaller one (resnet20 b64, model:h100, every
// whole per cent from 100 to 25 % of the peak): as quick searches they never won (10 such budgets
// before and after, compiles 23 % longer); as full searches, 8 instead of 10 (the 3.1 points at
// 30 % stayed), the 76 overheads' sum 1.9 points lower, for 65 % more compile time. Not kept: a
// plan found with a few per cent less memory is as chaotic in the budget as the first.
//
// Then, for such a network (or any, if `longer`: --solver thorough and exact), a third search with
// ten times the local-search work, led by the best plan without offload found so far; the fastest
// plan of the three wins. It is what closes the last gaps to exact mode: on the 44 points of
// optimality.py where exact mode finds a plan, the two searches alone were more than a point
// behind it three times (resnet50 b64 at 35 % of the peak on model:h100 and model:v100, +16.8 and
// +17.5 % against +13.6 and +15.0 %, and at 25 % on model:h100, +50.5 against +47.2 %), with it
// never (at most 0.2 points behind, median 0.0), for compiles of 0.2 to 11.8 s instead of 0.2 to
// 2.5 s. Cheaper third searches do not close them: on those three points, with two, three
// and five times the work instead of ten, +13.8 / +50.5 / +16.2, +16.7 / +50.5 / +16.0 and
// +13.6 / +47.8 / +15.5 % (with one time: none better than the two searches). ResNet-152 and
// larger networks, whose compile must stay under a second, are searched once.
ScheduleResult schedule_default(const ScheduleInput& si, bool longer, ScheduleResult* kept = nullptr,
                                std::vector<Residency>* kept_table = nullptr) {
  ScheduleResult own_kept;
  std::vector<Residency> own_kept_table;
  if (!kept) kept = &own_kept;
  if (!kept_table) kept_table = &own_kept_table;
  std::vector<Residency> r_table, q_table, won_table;  // won_table: the decisions of r, as it changes
  const bool small = static_cast<std::int64_t>(si.tasks->route.size()) < kReferenceLayers;
  // The first two searches are independent: they run side by side, so that each one's serial
  // parts (the placements after its branches) overlap the other's branches.
  ScheduleInput less = si;
  less.budget_bytes = si.budget_bytes - si.budget_bytes / 128;
  ScheduleResult r, q_less;
  std::vector<Residency> less_table;
  // And the plan --solver fast makes, so that the default never loses to it: fast's one branch
  // (offload as allowed, moDNN's placement) starts from the dynamic programming's checkpoints too,
  // which the default's branches with offload do not, and now and then that start ends faster
  // (the end-to-end review, model:h100 b2 at 100 % of the peak: vgg19 7.14 ms where the default
  // gave 7.18). On networks under kReferenceLayers, beside the first two searches; on larger ones
  // only for --solver thorough and exact, as ResNet-152's default compile must stay under a second
  // (there fast was 0.4 % faster on resnet152 b2 and 0.2 % on resnet230 b2). Kept at the end.
  const bool with_fast = !si.quick && (small || longer);
  ScheduleInput fast = si;
  fast.quick = true;
  ScheduleResult fast_plan;
  std::vector<Residency> fast_table;
  const std::size_t searches = 1 + (small && !si.quick ? 1 : 0) + (with_fast ? 1 : 0);
  parallel_for(searches, [&](std::size_t i) {
    if (i == 0) {
      r = schedule_ucplan(si, &r_table, kept, kept_table);
    } else if (i == 1 && small) {
      q_less = schedule_ucplan(less, &less_table);
    } else {
      fast_plan = schedule_ucplan(fast, &fast_table);
      try_carrying_input(fast, fast_table, fast_plan, false, false);
    }
  });
  won_table = r_table;
  // Where no table fits, the plan that recomputes every input in every stage may (search.h).
  auto or_every_stage = [&](ScheduleResult& found) {
    if (!found.ok) keep_faster(found, schedule_recompute_every_stage(si), "every input recomputed in every stage");
  };
  if (si.quick) {
    try_carrying_input(si, r_table, r, false, false);
    or_every_stage(r);
    return r;
  }
  struct Found {  // each search's plan, for refine_stages (networks under kReferenceLayers only)
    std::string prefix;
    std::vector<Residency> table;
    ScheduleResult result;
  };
  std::vector<Found> found;
  if (r.ok && small) found.push_back({"", r_table, r});
  auto merge = [&](ScheduleResult q, const std::string& prefix) {
    if (q.ok && small) found.push_back({prefix, q_table, q});
    const bool q_wins = q.ok && (!r.ok || q.round_ns < r.round_ns);
    ScheduleResult& won = q_wins ? q : r;
    const ScheduleResult& lost = q_wins ? r : q;
    std::vector<ScheduleResult::Candidate> log = r.search_log;
    for (const auto& c : q.search_log) log.push_back({prefix + c.name, c.round_ns, c.why});
    won.search_log = std::move(log);
    won.candidates_skipped += lost.candidates_skipped;
    if (q_wins) {
      r = std::move(q);
      won_table = q_table;
    }
  };
  if (small) {
    q_table = std::move(less_table);
    merge(std::move(q_less), fmt::format("with 1/128 less memory ({}): ", format_bytes(less.budget_bytes)));
  }
  if (small || longer) {
    ScheduleInput more = si;
    if (kept->ok) more.extra_seeds.push_back({"the best plan without offload", *kept_table});
    more.local_search_budget *= 10;
    ScheduleResult more_kept;
    std::vector<Residency> more_kept_table;
    merge(schedule_ucplan(more, &q_table, &more_kept, &more_kept_table), "ten times the local-search work: ");
    if (more_kept.ok && (!kept->ok || more_kept.round_ns < kept->round_ns)) {
      *kept = std::move(more_kept);
      *kept_table = std::move(more_kept_table);
    }
  }
  // Each search's plan refined stage by stage (search.h), not only the winner's: a refinement from
  // a plan ranked lower can end faster. On resnet20 b64 (model:h100 and model:v100, 54 budgets from
  // 100 to 25 % of the peak) the overheads sum to 524.1 points instead of 525.9 (at 25 % on
  // model:h100 +36.9 % instead of +38.7 %, the plan refined from the search with 1/128 less
  // memory; none slower), the 54 compiles in 245 s instead of 214 s. A refinement in a pool pays
  // for the placements it tries (refine_stages counts their search in its work): counted in none,
  // densenet40 b64 at 25 % of the peak on model:v100 compiled in 104 s (refining the plan of the
  // search with 1/128 less memory tried 48 placements of 1.7 s each, none fitting); counted, in
  // 14.7 s, the same plan (10 s refining only the winner's plan).
  // The refinements are independent of each other: they run side by side, and are merged in order.
  if (small && r.ok) {
    std::vector<ScheduleResult> refinements(found.size());
    parallel_for(found.size(),
                 [&](std::size_t i) { refinements[i] = refine_stages(si, found[i].table, found[i].result); });
    for (std::size_t i = 0; i < found.size(); ++i) {
      const Found& f = found[i];
      ScheduleResult& q = refinements[i];
      if (!q.ok || q.round_ns >= r.round_ns) continue;
      // The report's log: every search's candidates (merged into r), then this refinement's line.
      ScheduleResult::Candidate refined = q.search_log.back();
      refined.name = f.prefix + refined.name;
      q.search_log = std::move(r.search_log);
      q.search_log.push_back(std::move(refined));
      q.candidates_skipped = r.candidates_skipped;
      r = std::move(q);
      won_table = f.table;  // the refinement's starting point (its own plan is stage by stage)
    }
  }
  try_carrying_input(si, won_table, r, small, true);
  if (with_fast) keep_faster(r, std::move(fast_plan), "the plan of --solver fast");
  or_every_stage(r);
  return r;
}

// One sub-batch candidate's schedule: the strategy's, or the default search's (schedule_default),
// or exact mode's. Exact mode runs the default search with its longer third search whatever the
// network's size (so it is never slower than --solver thorough), reads that search's best plan
// without offload back stage by stage as the MILP's first incumbent, simulates the MILP's solution
// stage by stage (what it keeps into each stage stays, the rest is recomputed where a task needs
// it; placed first-fit and two-ended, with and without on-demand offload), and searches again with
// ten times the local-search work, the MILP's solution and that best plan without offload leading
// the seeds. The fastest plan of all is kept, so it is never slower than the default.
ScheduleResult schedule_candidate(Pipeline& x, const CostTable& ct, CandidateOutcome& o) {
  const CompileInput& in = x.in;
  ScheduleInput si;
  si.graph = &x.g;
  si.tasks = &x.tg;
  si.costs = &ct;
  si.budget_bytes = in.budget_bytes;
  si.batch = x.batch;
  si.fixed_config = fixed_configs(x.opt.workspace, x.g, x.tg, ct, &o.wd_unproven);
  si.offload = x.opt.offload;
  si.quick = x.opt.quick || x.opt.solver == Solver::Fast;
  si.local_search_budget = std::llround(static_cast<double>(si.local_search_budget) * x.opt.search_work);
  if (x.opt.strategy != "ucplan") {
    auto strategy = make_baseline_strategy(x.opt.strategy, x.g, x.tg, ct);
    return simulate_schedule(si, *strategy);
  }
  auto progress = [&](const std::string& what) {
    if (in.progress) in.progress(fmt::format("sub-batch {}: {}", ct.sub_batch, what));
  };
  const bool exact = x.opt.solver == Solver::Exact;
  progress(exact ? "exact mode, the search that seeds the MILP" : "searching");
  if (!exact) return schedule_default(si, x.opt.solver == Solver::Thorough);
  ScheduleResult kept;  // the default's best plan without offload: the MILP's first incumbent
  std::vector<Residency> kept_table;
  ScheduleResult best = schedule_default(si, true, &kept, &kept_table);
  auto consider = [&](ScheduleResult r, const std::string& what) {
    keep_faster(best, std::move(r), "exact mode: " + what);
  };
  ScheduleInput kept_in = si;
  kept_in.offload = false;
  ScheduleResult recorded;
  if (kept.ok) {
    kept_in.record_stages = true;
    kept_in.best_fit = kept.best_fit;  // as the search placed it
    kept_in.two_ended = kept.two_ended;
    auto strategy = make_table_strategy("ucplan", kept_table, PrefetchMode::Eq4, true, true, false);
    recorded = simulate_schedule(kept_in, *strategy);
  }
  o.milp = true;
  // One limit for every MILP of the compile (one per sub-batch candidate): each gets what the
  // earlier ones left, and at least a second (or the whole limit, if shorter), which is enough for
  // CBC to return its first incumbent (the default's plan), so every candidate still gets a plan.
  const double spent = in.milp_seconds + x.milp_seconds;
  const double limit =
      x.opt.time_limit_s > 0 ? std::max(std::min(1.0, x.opt.time_limit_s), x.opt.time_limit_s - spent) : 0;
  // With offload allowed, a second MILP models the copies too (remat_milp.h), so its bound holds for
  // every plan. CBC uses one core: where this process may use two or more, the two MILPs run side
  // by side, each with the whole limit (each in a process of its own, ilp_cbc.cpp); on one core the
  // recompute-only MILP comes first with three quarters of the limit (its solution leads the seeds,
  // and its bound says what offload buys), then the MILP with offload with the rest. The latter's
  // LP is slow since it counts what leaves the device (remat_milp.h, A): on resnet20 b64,
  // model:h100, at 25 % of the peak, a quarter of 60 s ended before it (the bound stayed the ideal
  // round, 1.75 ms), the whole 60 s did (1.84 ms). Its time is chaotic: standalone, as run_cbc
  // solves it, 2 s at 70 %, 47 s at 25 % and 67 s at 35 %; Clp's dual simplex through ClpSolve 43 s
  // at 35 % but 107 s at 25 %; at 50 % on model:v100 the dual simplex did not end in 90 s and the
  // primal did in 40 s, which does not end at 35 % on model:h100 in 90 s.
  const bool side_by_side = si.offload && usable_cores() >= 2;
  const double first = limit > 0 && si.offload && !side_by_side ? std::max(std::min(1.0, limit), limit * 3 / 4) : limit;
  auto for_up_to = [](double seconds) {
    return seconds > 0 ? fmt::format(" for up to {}", format_seconds(seconds)) : std::string();
  };
  const ScheduleResult* start = recorded.ok ? &recorded : nullptr;
  auto solve_offload = [&](double seconds) {
    o.milp_offload = solve_remat_milp(x.g, x.tg, ct, in.budget_bytes, seconds, start, si.fixed_config, true);
  };
  if (side_by_side) {
    progress("exact mode, the recompute-only MILP and the MILP with offload side by side (CBC" + for_up_to(limit) +
             ")");
    // Both built here, then both children forked from this thread before either is waited for
    // (solve_ilps): no other thread runs at a fork.
    const RematMilp only = build_remat_milp(x.g, x.tg, ct, in.budget_bytes, limit, start, si.fixed_config);
    const RematMilp with = build_remat_milp(x.g, x.tg, ct, in.budget_bytes, limit, start, si.fixed_config, true);
    std::vector<const Ilp*> ilps;
    for (const RematMilp* m : {&only, &with})
      if (m->solve) ilps.push_back(&m->ilp);
    const std::vector<IlpResult> answers = solve_ilps(ilps);
    std::size_t k = 0;
    o.milp_result = only.read(only.solve ? answers[k++] : IlpResult{});
    o.milp_offload = with.read(with.solve ? answers[k++] : IlpResult{});
    o.milp_seconds = std::max(o.milp_result.seconds, o.milp_offload.seconds);
  } else {
    progress("exact mode, the recompute-only MILP (CBC" + for_up_to(first) + ")");
    o.milp_result = solve_remat_milp(x.g, x.tg, ct, in.budget_bytes, first, start, si.fixed_config);
    o.milp_seconds = o.milp_result.seconds;
    if (si.offload) {  // the rest of the limit, at most a quarter
      const double rest =
          limit > 0 ? std::max(std::min(1.0, limit), std::min(limit / 4, limit - o.milp_result.seconds)) : 0;
      progress("exact mode, the MILP with offload (CBC" + for_up_to(rest) + ")");
      solve_offload(rest);
      o.milp_seconds += o.milp_offload.seconds;
    }
  }
  x.milp_seconds += o.milp_seconds;
  if (auto known = in.milp_bounds.find(ct.sub_batch); known != in.milp_bounds.end() && o.milp_result.solved())
    o.milp_result.bound_round_ns = std::max(o.milp_result.bound_round_ns, known->second);
  if (si.offload && !o.milp_offload.table.empty() && o.milp_offload.table != o.milp_result.table)
    si.extra_seeds.push_back({"the offload MILP's decisions", o.milp_offload.table});
  if (o.milp_result.table.empty()) return best;
  progress("exact mode, the MILP's solution simulated and searched from");
  // The MILP counts bytes, not where they go: the arena's fragmentation can defeat its solution,
  // so it is placed both ways (moDNN's first fit, two-ended). On-demand offload can rescue it too,
  // but it also copies out what the MILP meant to keep: both are simulated.
  // Its conv configurations too: as the MILP chose them, or chosen as the simulation goes (the
  // simulator's Eq. 5 gain sees where the arena's holes are, which the MILP does not).
  // Each also with the batch's input carried across rounds (ScheduleInput::carry_input).
  for (const bool carry : {false, true}) {
    if (carry && carriable_inputs(*si.tasks).empty()) break;
    const std::string carried = carry ? ", the batch's input carried across rounds" : "";
    for (const bool milp_configs : {false, true}) {
      for (const bool two_ended : {false, true}) {
        ScheduleInput staged = si;
        staged.two_ended = two_ended;
        staged.carry_input = carry;
        if (milp_configs) staged.fixed_config = o.milp_result.config;
        const std::string how = std::string(two_ended ? ", two-ended placement" : "") +
                                (milp_configs ? ", the MILP's configurations" : "") + carried;
        consider(simulate_staged(staged, o.milp_result.staged, false), "the MILP's solution stage by stage" + how);
        if (si.offload)
          consider(simulate_staged(staged, o.milp_result.staged, true),
                   "the MILP's solution stage by stage, offloading on demand" + how);
      }
      // Or, as the MILP counts, bytes only, the buffers placed afterwards (ScheduleInput::pool_bytes),
      // with more slack for the placement's gaps until they fit.
      for (const int shift : kPoolSlackShifts) {
        ScheduleInput pooled = si;
        pooled.offload = false;
        pooled.carry_input = carry;
        pooled.pool_bytes = ScheduleInput::pool_for(si.budget_bytes, shift);
        if (milp_configs) pooled.fixed_config = o.milp_result.config;
        ScheduleResult r = simulate_staged(pooled, o.milp_result.staged, false);
        const bool placed = r.ok;
        consider(
            std::move(r),
            fmt::format("the MILP's solution stage by stage, placed after scheduling ({} at once){}{}",
                        format_bytes(pooled.pool_bytes), milp_configs ? ", the MILP's configurations" : "", carried));
        if (placed) break;
      }
    }
  }
  si.extra_seeds.insert(si.extra_seeds.begin(), {"the MILP's decisions", o.milp_result.table});
  if (kept.ok) si.extra_seeds.push_back({"the best plan without offload", kept_table});
  si.local_search_budget *= 10;
  std::vector<Residency> seeded_table;
  ScheduleResult seeded = schedule_ucplan(si, &seeded_table);
  try_carrying_input(si, seeded_table, seeded, false, true);
  consider(std::move(seeded), "the search seeded with the MILP's solution");
  return best;
}

// 6. The sub-batch: every candidate scheduled (those that cannot fit or cannot beat the best
// found are skipped, saying why); the fastest predicted iteration wins.
void choose_sub_batch(Pipeline& x) {
  const CompileInput& in = x.in;
  const Graph& g = x.g;
  const TaskGraph& tg = x.tg;
  const std::int64_t batch = x.batch;
  std::int64_t best_total = 0;
  std::string last_failure;
  std::int64_t last_need = 0;  // the last candidate's, where it needs more than the budget
  for (auto b : x.cands) {
    const CostTable& ct = x.tables.at(b);
    CandidateOutcome o;
    o.sub_batch = b;
    const std::int64_t rounds = batch / b;
    const std::int64_t need = min_plan_bytes(tg, ct);
    last_need = 0;
    if (need > in.budget_bytes) {
      o.why = fmt::format("needs at least {} at this sub-batch", format_bytes_apart(need, in.budget_bytes).first);
      last_need = need;
      x.out.candidates.push_back(o);
      continue;
    }
    std::int64_t floor_round = 0, floor_final = 0;
    for (const Task& t : tg.tasks) (t.round_task ? floor_round : floor_final) += ct.tasks[t.id].time_ns;
    if (x.best.ok && rounds * floor_round + floor_final >= best_total) {
      o.why = fmt::format("cannot beat sub-batch {}: its ideal time is already {}", x.best_b,
                          format_ns(rounds * floor_round + floor_final));
      x.out.candidates.push_back(o);
      continue;
    }
    ScheduleResult r = schedule_candidate(x, ct, o);
    o.ok = r.ok;
    o.why = r.failure;
    o.search = r.search_log;
    o.predicted_ns = rounds * r.round_ns + r.final_ns;
    x.out.candidates.push_back(o);
    if (!r.ok) {
      last_failure = fmt::format("at sub-batch {}: {}", b, r.failure);
      continue;
    }
    if (!x.best.ok || o.predicted_ns < best_total) {
      x.best = std::move(r);
      x.best_b = b;
      best_total = o.predicted_ns;
    }
  }
  if (x.best.ok) return;
  if (in.failed_candidates) *in.failed_candidates = x.out.candidates;
  std::vector<std::string> hints;
  if (g.has_batch_norm() && x.opt.sub_batch.kind == SubBatchOption::Kind::Auto && x.costable.size() > 1)
    hints.push_back(
        "the network has batch-norm, so it is not split into sub-batches unless you pass --sub-batch any or N");
  if (!x.opt.offload)  // the lower bound holds with offload: without it no plan may exist down to it
    hints.push_back("--offload never: a plan that copies activations to the host may fit; the default allows it");
  const std::string hint = hints.empty() ? "" : fmt::format(" ({})", fmt::join(hints, "; "));
  const CandidateOutcome& last = x.out.candidates.back();
  const std::string why =
      last_failure.empty() ? fmt::format("at sub-batch {}: {}", last.sub_batch, last.why) : last_failure;
  // The budget as exactly as the need the message quotes, where the last candidate's is quoted.
  const std::string within = last_failure.empty() && last_need > 0
                                 ? format_bytes_apart(in.budget_bytes, last_need).first
                                 : format_bytes(in.budget_bytes);
  throw UserError("", "--budget",
                  fmt::format("strategy {} finds no plan for {} at batch {} within {}: {}{}", x.opt.strategy,
                              g.net.name, batch, within, why, hint));
}

// 7. The plan: the winner's buffers and steps, the options, the summary and the notes.
// What the notes on a measured CUDA profile's copies and launch gap tell a user to run.
constexpr const char* kCalibrateHow =
    "ucplan run PLAN --device cuda --trace T.json, then ucplan calibrate PROFILE -t T.json -o CALIBRATED.json, and "
    "compile from CALIBRATED.json";

void assemble_plan(Pipeline& x) {
  const CompileInput& in = x.in;
  const Profile& profile = in.profile;
  const std::int64_t batch = x.batch;
  const Graph& g = x.g;
  ScheduleResult& best = x.best;
  Plan& p = x.out.plan;
  p.generator = std::string("ucplan ") + UCPLAN_VERSION;
  p.network = in.network;
  p.network_sha256 = sha256_hex(network_to_json_text(in.network));
  p.profile_path = in.profile_in_plan.empty() ? in.profile_path : in.profile_in_plan;
  p.profile_sha256 = in.profile_sha256;
  p.profile_source = profile.source;
  p.device = profile.device.name;
  p.batch = batch;
  p.budget_bytes = in.budget_bytes;
  p.strategy = x.opt.strategy;
  p.sub_batch_option = sub_batch_option_text(x.opt.sub_batch);
  p.workspace_option = x.opt.workspace.text;
  p.micro_batches = sizes_policy_name(x.opt.micro_batches);
  p.solver = solver_name(x.opt.solver);
  p.precision = in.precision;
  p.loss_scale = x.opt.loss_scale.empty() ? default_loss_scale(in.precision) : x.opt.loss_scale;
  p.solver_time_limit_ms = std::llround(x.opt.time_limit_s * 1000);
  p.offload = x.opt.offload ? "allowed" : "never";
  p.sub_batch = x.best_b;
  p.rounds = batch / x.best_b;
  p.modnn_sub_batch = x.modnn_b;
  p.sub_batch_changes_statistics = g.has_batch_norm() && p.rounds > 1;
  p.workspace_policy = workspace_policy_text(x.opt.workspace, x.opt.strategy);
  const OffsetReassignment placed = assign_offsets_after_scheduling(best.buffers, best.steps, best.arena_bytes);
  const std::int64_t simulated_arena = std::max(best.simulated_arena_bytes, placed.before_bytes);
  best.arena_bytes = placed.after_bytes;
  p.arena_bytes = best.arena_bytes;
  p.buffers = std::move(best.buffers);
  p.host_buffers = std::move(best.host_buffers);
  p.steps = std::move(best.steps);
  p.kernels = std::move(best.kernels);
  PlanSummary& s = p.summary;
  s.round_ns = best.round_ns;
  s.final_ns = best.final_ns;
  s.predicted_ns = p.rounds * best.round_ns + best.final_ns;
  s.ideal_ns = ideal_ns(x.tg, x.tables, batch);
  s.peak_bytes = best.arena_bytes;
  s.lower_bound_bytes = x.lb.bytes;
  s.offload_bytes = p.rounds * best.offload_bytes;
  s.prefetch_bytes = p.rounds * best.prefetch_bytes;
  s.input_bytes = p.rounds * best.input_bytes;
  s.recompute_ns = p.rounds * best.recompute_ns;
  s.recompute_steps = best.recompute_steps;
  s.workspace_peak_bytes = best.workspace_peak_bytes;
  if (!profile.measured())
    p.notes.push_back("times are predicted from a modelled profile (" + profile.source + "), not measured");
  if (const std::string shared = shared_cpu_warning(profile); !shared.empty()) p.notes.push_back(shared);
  // Costs are looked up by layer signature, so a profile of another network (or of this one
  // before an edit) serves wherever it has every signature; said, since its costs were measured
  // among other layers.
  if (!profile.network_sha256.empty() && profile.network_sha256 != p.network_sha256)
    p.notes.push_back(
        fmt::format("the profile was made for {} (another network_sha256): its costs are taken "
                    "for this network's layers by signature",
                    profile.network == p.network.name ? "an earlier version of network " + profile.network
                                                      : "network " + profile.network));
  if (profile.h2d.calibration || profile.d2h.calibration) {
    std::string lines;
    for (const auto& [name, t] : {std::pair{"host-to-device", &profile.h2d}, std::pair{"device-to-host", &profile.d2h}})
      if (t->calibration)
        lines += fmt::format("{}{} {:.2f} GB/s (the profiler's {:.2f}) from {} copies", lines.empty() ? "" : ", ", name,
                             t->bytes_per_second / 1e9, t->calibration->bench_bytes_per_second / 1e9,
                             t->calibration->copies);
    p.notes.push_back("copy times are calibrated to traced runs (ucplan calibrate): " + lines);
  } else if (profile.measured() && profile.device.kind == "cuda" && s.offload_bytes > 0) {
    // Measured on an H100 (benchmarks/results/gpu-h100.md parts G, H, J): the plans' copies ran
    // slower than the profiler's copies alone, and the default, trusting the profiler, offloaded up to
    // twice as much as from calibrated copies and measured up to 3.6 ms (4 %) slower for it.
    p.notes.push_back(fmt::format(
        "copy times are the profiler's, each copy timed alone on an idle device; beside a plan's kernels on an H100 "
        "they took 1.07-1.14x as long, and plans that copy much measured up to 6 % over their prediction. To plan "
        "with the copies your runs see: {}",
        kCalibrateHow));
  }
  if (const auto& gap = profile.launch_gap) {
    p.notes.push_back(fmt::format(
        "every kernel's time includes a launch gap of {} (ucplan calibrate: the compute stream's idle time between "
        "kernels that wait for nothing, from {} gaps in {} traced run{}), the ideal's too",
        format_seconds(gap->seconds), gap->gaps, gap->traces, gap->traces == 1 ? "" : "s"));
  } else if (profile.measured() && profile.device.kind == "cuda") {
    // Short kernels pay most for the gap the profile leaves out (gpu_results.py part N: 1.25 to
    // 1.47 us on every H100 trace; resnet20 b64 measured 1.136x its prediction, 1.067x with it).
    constexpr double kH100GapSeconds = 1.25e-6;
    const auto kernels =
        std::count_if(p.steps.begin(), p.steps.end(), [](const PlanStep& st) { return st.stream == Stream::Compute; });
    const double share = static_cast<double>(kernels) * kH100GapSeconds * 1e9 /
                         static_cast<double>(std::max<std::int64_t>(s.predicted_ns, 1));
    if (share >= 0.01)
      p.notes.push_back(fmt::format(
          "kernel times are the profiler's, which leave out the compute stream's idle time between kernels: on an "
          "H100 about {} each, which would add about {:.0f} % to this plan's {} kernels. To plan with it: {}",
          format_seconds(kH100GapSeconds), 100 * share, kernels, kCalibrateHow));
  }
  // A profile of another batch serves where its sizes divide this one (batch-norm networks, which
  // run whole, are refused in build_costs), but none is the whole batch: said, as the plan and its
  // ideal are then the best of smaller sub-batches (vgg16 b100 from a b256 profile: 25 rounds of 4,
  // "+0.0 %", where a profile at b100 gives one round 14 % faster).
  if (std::find(profile.sizes.begin(), profile.sizes.end(), batch) == profile.sizes.end())
    p.notes.push_back(
        profile.batch == batch  // a profile edited down to some of its sizes
            ? fmt::format("the profile has no measurements at the whole batch of {} samples: the plan runs "
                          "sub-batches of at most {}, and its ideal is the fastest of those sizes",
                          batch, x.costable.back())
            : fmt::format("the profile has no measurements at the whole batch of {} samples (it was made at --batch {} "
                          "with --sizes {}): the plan runs sub-batches of at most {}, and its ideal is the fastest of "
                          "those sizes; profile at --batch {} for a plan that may run the batch whole",
                          batch, profile.batch, sizes_policy_name(profile.sizes_policy), x.costable.back(), batch));
  if (p.sub_batch_changes_statistics)
    p.notes.push_back(fmt::format(
        "batch-norm statistics are computed per sub-batch of {} samples ({} rounds), as asked with --sub-batch",
        p.sub_batch, p.rounds));
  for (const CandidateOutcome& o : x.out.candidates)
    if (o.sub_batch == x.best_b && o.wd_unproven)
      p.notes.push_back(fmt::format(
          "WD: the kernels' configurations take {} together, not proven the least for the total workspace (at most "
          "{} more than the least)",
          format_ns(o.wd_unproven->time_ns), format_ns(o.wd_unproven->time_ns - o.wd_unproven->lower_bound_ns)));
  if (best.candidates_skipped > 0)
    p.notes.push_back(
        fmt::format("the ucplan search stopped {} candidate(s) short: its work budget was spent (large network)",
                    best.candidates_skipped));
  bool stopped_at_limit = false;  // a MILP ended by --time-limit (without one, each runs to a deterministic end)
  for (const CandidateOutcome& o : x.out.candidates) {
    if (o.sub_batch != x.best_b) continue;
    for (const RematMilpResult* m : o.milps()) {
      stopped_at_limit |= x.opt.time_limit_s > 0 && (m->status == RematMilpResult::Status::feasible ||
                                                     m->status == RematMilpResult::Status::no_solution);
      const char* which = m->offload ? "the MILP with offload" : "the rematerialisation MILP";
      if (!m->solved()) {
        p.notes.push_back(m->infeasible_why.empty()
                              ? fmt::format("exact mode: {} ({} variables, {} rows) found {}", which, m->variables,
                                            m->rows, remat_milp_status_name(m->status))
                              : fmt::format("exact mode: no {}plan fits, so {} was not solved: {}",
                                            m->offload ? "" : "recompute-only ", which, m->infeasible_why));
        continue;
      }
      // The MILP models this sub-batch's rounds: its bound is for plans in them (a forced --sub-batch
      // 8 of a batch of 16 was bounded at 513 us where the whole batch runs in 270 us).
      const std::int64_t bound = p.rounds * m->any_plan_bound_round_ns() + best.final_ns;
      const double gap = static_cast<double>(s.predicted_ns - bound) / static_cast<double>(bound);
      p.notes.push_back(fmt::format(
          "exact mode: {} ({} variables, {} rows) is {}; no {}plan in route order in sub-batches of {} ({} round{}) "
          "can take less than {} ({} over the ideal); this plan is {} {} that bound{}",
          which, m->variables, m->rows, remat_milp_status_name(m->status), m->offload ? "" : "recompute-only ",
          p.sub_batch, p.rounds, p.rounds == 1 ? "" : "s", format_ns(bound),
          format_percent(static_cast<double>(bound - s.ideal_ns) / static_cast<double>(s.ideal_ns)),
          fmt::format("{:.1f} %", std::fabs(gap) * 100.0), gap < 0 ? "under" : "over",
          s.offload_bytes > 0 && !m->offload ? " (it also offloads, which this MILP does not model)" : ""));
    }
  }
  if (stopped_at_limit)
    p.notes.push_back(
        "exact mode: a MILP stopped at --time-limit with what CBC had found by then, which depends on how fast this "
        "machine solved it: the plan may not be reproduced byte for byte (without --time-limit the MILPs run to "
        "their end, and the plan is the same every time)");
  // Placed by best fit, or, where best fit in three orders did not fit the budget, by the search
  // (offsets.h); a best fit found now that is smaller replaces the search's placement.
  const std::string placed_how =
      best.placement_search_nodes > 0 && !placed.applied
          ? fmt::format(
                "a search placed them, as best fit in three orders did not fit them in the budget (MiniMalloc's "
                "manner, {} nodes)",
                best.placement_search_nodes)
          : "each buffer went into the best-fitting gap (as XLA's heap simulator)";
  if (best.pool_bytes > 0)
    p.notes.push_back(
        fmt::format("buffers placed after scheduling: the schedule counted bytes against {} ({}), then "
                    "{}: arena {}",
                    format_bytes(best.pool_bytes),
                    best.pool_bytes < p.budget_bytes    ? "the budget less room for gaps"
                    : best.pool_bytes == p.budget_bytes ? "the whole budget"
                                                        : "more than the budget, for a faster plan",
                    placed_how, format_bytes(best.arena_bytes)));
  else if (simulated_arena > best.arena_bytes)
    p.notes.push_back(fmt::format(
        "offsets placed after scheduling: {}; arena {} {}", placed_how, format_bytes(best.arena_bytes),
        format_bytes(best.arena_bytes) == format_bytes(simulated_arena)
            ? fmt::format("({} less than the simulation's)", format_bytes(simulated_arena - best.arena_bytes))
            : fmt::format("instead of the simulation's {}", format_bytes(simulated_arena))));
  if (best.defragmentations > 0)
    p.notes.push_back(
        fmt::format("{} defragmentation(s) per round: the budget is close to the bound", best.defragmentations));
}

// --dump-after: each stage's result as JSON.
std::string dump_graph(const Pipeline& x) { return dump_json(graph_json(x.g, x.tg)); }

std::string dump_liveness(const Pipeline& x) {
  return dump_json(OrderedJson{{"stage", "liveness"},
                               {"batch", x.batch},
                               {"baseline_peak_bytes", x.lv.baseline_peak},
                               {"liveness_peak_bytes", x.lv.liveness_peak},
                               {"peak_step", x.lv.peak_step},
                               {"live_bytes", x.lv.live_bytes}});
}

std::string dump_lower_bound(const Pipeline& x) {
  return dump_json(OrderedJson{{"stage", "lower-bound"},
                               {"bytes", x.lb.bytes},
                               {"resident_bytes", x.lb.resident_bytes},
                               {"max_task_bytes", x.lb.max_task_bytes},
                               {"task", task_label(x.g, x.tg.tasks[x.lb.task])}});
}

std::string dump_conv_configs(const Pipeline& x) {
  const Graph& g = x.g;
  const TaskGraph& tg = x.tg;
  const std::map<std::int64_t, CostTable>& tables = x.tables;
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
  return dump_json(OrderedJson{{"stage", "conv-configs"}, {"kernels", kernels}});
}

std::string dump_sub_batch(const Pipeline& x) {
  OrderedJson c = OrderedJson::array();
  for (const auto& o : x.out.candidates)
    c.push_back({{"sub_batch", o.sub_batch}, {"ok", o.ok}, {"predicted_ns", o.predicted_ns}, {"why", o.why}});
  return dump_json(OrderedJson{{"stage", "sub-batch"},
                               {"costable", x.costable},
                               {"candidates", x.cands},
                               {"modnn_eq3", x.modnn_b},
                               {"outcomes", c}});
}

std::string dump_plan(const Pipeline& x) { return plan_to_json_text(x.out.plan); }

// The pipeline, in execution order: each stage, and what --dump-after STAGE writes after it.
struct StageRow {
  const char* name;
  void (*run)(Pipeline&);
  std::string (*dump)(const Pipeline&);
};
constexpr StageRow kStages[] = {
    {"graph", build_ir, dump_graph},
    {"liveness", run_liveness, dump_liveness},
    {"lower-bound", run_lower_bound, dump_lower_bound},
    {"conv-configs", build_costs, dump_conv_configs},
    {"sub-batch", choose_sub_batch, dump_sub_batch},
    {"schedule", assemble_plan, dump_plan},
};

}  // namespace

std::vector<std::string> dump_stage_names() {
  std::vector<std::string> names;
  for (const StageRow& s : kStages) names.push_back(s.name);
  return names;
}

namespace {

// "60s", "1.5min", "90" (seconds) -> seconds; UserError naming --time-limit otherwise.
double parse_time_limit(const std::string& text) {
  const std::optional<double> s = parse_seconds(text);
  if (!s || !(*s > 0) || *s > 1e6)
    throw UserError("", "--time-limit",
                    fmt::format("\"{}\" is not a positive time such as 60s, 1.5min or 1h (at most 10^6 s)", text));
  return *s;
}

}  // namespace

const char* solver_name(Solver s) {
  switch (s) {
    case Solver::Fast:
      return "fast";
    case Solver::Default:
      return "default";
    case Solver::Thorough:
      return "thorough";
    case Solver::Exact:
      return "exact";
  }
  return "?";
}

PlanOptions parse_plan_options(const PlanOptionText& t) {
  PlanOptions o;
  const auto names = strategy_names();
  if (std::find(names.begin(), names.end(), t.strategy) == names.end())
    throw UserError("", "--strategy", fmt::format("unknown strategy \"{}\" ({})", t.strategy, fmt::join(names, ", ")));
  o.strategy = t.strategy;
  o.sub_batch = parse_sub_batch_option(t.sub_batch);
  o.workspace = parse_workspace_option(t.workspace);
  if (auto policy = parse_sizes_policy(t.micro_batches))
    o.micro_batches = *policy;
  else
    throw UserError("", "--micro-batches",
                    fmt::format("expected all, powerOfTwo or undivided, got \"{}\"", t.micro_batches));
  const Solver solvers[] = {Solver::Fast, Solver::Default, Solver::Thorough, Solver::Exact};
  const auto* s =
      std::find_if(std::begin(solvers), std::end(solvers), [&](Solver v) { return t.solver == solver_name(v); });
  if (s == std::end(solvers))
    throw UserError("", "--solver", fmt::format("expected fast, default, thorough or exact, got \"{}\"", t.solver));
  o.solver = *s;
  if (o.solver != Solver::Default && o.strategy != "ucplan")
    throw UserError("", "--solver",
                    fmt::format("{} is a choice of the ucplan strategy, not of {}", t.solver, o.strategy));
  if (!t.time_limit.empty()) {
    if (o.solver != Solver::Exact) throw UserError("", "--time-limit", "only with --solver exact");
    o.time_limit_s = parse_time_limit(t.time_limit);
  }
  if (t.offload != "allowed" && t.offload != "never")
    throw UserError("", "--offload", fmt::format("expected allowed or never, got \"{}\"", t.offload));
  o.offload = t.offload == "allowed";
  if (!o.offload && o.strategy != "ucplan")
    throw UserError("", "--offload", fmt::format("never is a choice of the ucplan strategy, not of {}", o.strategy));
  if (!t.loss_scale.empty())
    if (const std::string why = loss_scale_error(t.loss_scale); !why.empty()) throw UserError("", "--loss-scale", why);
  o.loss_scale = t.loss_scale;
  if (!t.dump_after.empty()) {
    const auto stages = dump_stage_names();
    if (std::find(stages.begin(), stages.end(), t.dump_after) == stages.end())
      throw UserError("", "--dump-after",
                      fmt::format("unknown stage \"{}\" ({})", t.dump_after, fmt::join(stages, ", ")));
  }
  o.dump_after = t.dump_after;
  return o;
}

CompileResult make_plan(const CompileInput& in) {
  check_against_profile(in);
  Pipeline x(in);
  for (const StageRow& stage : kStages) {
    stage.run(x);
    if (x.opt.dump_after != stage.name) continue;
    x.out.dump = stage.dump(x);
    if (in.stop_after_dump) return std::move(x.out);
  }
  // 8. Verify (independent re-simulation). A failure here is a planner bug, not a user error.
  const std::string error = find_plan_error(x.out.plan);
  UCPLAN_CHECK(error.empty(), "the planner produced a plan its checker rejects: " + error);
  return std::move(x.out);
}

}  // namespace ucplan
