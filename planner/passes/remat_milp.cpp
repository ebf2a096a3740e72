#include "remat_milp.h"

#include <algorithm>
#include <chrono>

#include "planner/solve/ilp.h"
#include "planner/model/errors.h"

namespace ucplan {

const char* remat_milp_status_name(RematMilpResult::Status s) {
  switch (s) {
    case RematMilpResult::Status::optimal:
      return "optimal";
    case RematMilpResult::Status::feasible:
      return "feasible (not proven optimal)";
    case RematMilpResult::Status::infeasible:
      return "infeasible";
    case RematMilpResult::Status::no_solution:
      return "no solution within the limit";
  }
  return "?";
}

namespace {

constexpr std::int64_t kAlign = 256;  // every arena buffer starts on 256 bytes
std::int64_t aligned(std::int64_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

}  // namespace

RematMilpResult solve_remat_milp(const Graph& g, const TaskGraph& tg, const CostTable& costs, std::int64_t budget_bytes,
                                 double max_seconds, const ScheduleResult* start,
                                 const std::vector<int>& fixed_config) {
  const auto start_time = std::chrono::steady_clock::now();
  RematMilpResult res;
  const int nt = static_cast<int>(tg.tensors.size());
  const std::int64_t b = costs.sub_batch;

  // Stages: the round's tasks in route order, as the scheduler runs them.
  std::vector<int> order;
  std::vector<int> stage_of(tg.tasks.size(), -1);
  for (const Task& t : tg.tasks)
    if (t.round_task) {
      stage_of[t.id] = static_cast<int>(order.size());
      order.push_back(t.id);
    }
  const int n = static_cast<int>(order.size());
  int bwd_start = n;
  for (int s = 0; s < n; ++s)
    if (tg.tasks[order[s]].kind != TaskKind::Forward) {
      bwd_start = s;
      break;
    }

  // The values the MILP decides: activations of forward layers other than the input and the loss.
  std::vector<char> decided(nt, 0);
  std::vector<int> born(nt, -1), last(nt, -1);
  for (int l : tg.route) {
    const int y = tg.y_of[l];
    if (l == 0 || y < 0 || tg.tensors[y].host_input || g.layers[l].type() == LayerType::SoftmaxLoss) continue;
    decided[y] = 1;
    born[y] = stage_of[costs.forward_task[l]];
  }
  for (int s = 0; s < n; ++s)
    for (int x : tg.tasks[order[s]].reads)
      if (decided[x]) last[x] = std::max(last[x], s);
  // Recomputing i at stage t needs its inputs then: their spans reach as far as i's (reverse route
  // order visits consumers before producers).
  for (auto it = tg.route.rbegin(); it != tg.route.rend(); ++it) {
    const int y = tg.y_of[*it];
    if (y < 0 || !decided[y]) continue;
    last[y] = std::max(last[y], born[y]);
    for (int x : tg.tasks[costs.forward_task[*it]].reads)
      if (decided[x]) last[x] = std::max(last[x], last[y]);
  }

  // Variables R[t,i], S[t,i] for t in (born_i, last_i].
  std::vector<int> base(nt, -1);
  int nv = 0;
  for (int i = 0; i < nt; ++i)
    if (decided[i] && last[i] > born[i]) {
      base[i] = nv;
      nv += 2 * (last[i] - born[i]);
    }
  // Variables Z[s,c] for a conv stage s with more than one allowed configuration: T_s runs with
  // front entry c (its time and workspace). A fixed configuration (--workspace wr:/wd:) is the
  // only one allowed.
  std::vector<int> zbase(n, -1), zfirst(n, 0), zcount(n, 0);
  for (int s = 0; s < n; ++s) {
    const int task = order[s];
    if (!tg.tasks[task].conv_kernel) continue;
    const int fixed = task < static_cast<int>(fixed_config.size()) ? fixed_config[task] : -1;
    zfirst[s] = std::max(fixed, 0);
    zcount[s] = fixed >= 0 ? 1 : static_cast<int>(costs.tasks[task].front.size());
    if (zcount[s] > 1) {
      zbase[s] = nv;
      nv += zcount[s];
    }
  }
  auto in_span = [&](int i, int t) { return decided[i] && t > born[i] && t <= last[i]; };
  auto R = [&](int i, int t) { return base[i] + 2 * (t - born[i] - 1); };
  auto S = [&](int i, int t) { return base[i] + 2 * (t - born[i] - 1) + 1; };

  Ilp ilp;
  ilp.objective.assign(nv, 0);
  std::vector<std::int64_t> redo_ns(nt, 0);
  // Every round starts with the first task's host inputs (the batch) copied in: no task can
  // start before they arrive (the executor does not overlap rounds), so that copy is part of
  // every plan's round and of the bound.
  std::int64_t tasks_ns = 0;
  for (int task : order) tasks_ns += costs.tasks[task].time_ns;
  if (n > 0) {
    std::int64_t entry_bytes = 0;
    for (int x : tg.tasks[order[0]].reads)
      if (tg.tensors[x].host_input) entry_bytes += tg.tensors[x].bytes(b);
    if (entry_bytes > 0) tasks_ns += costs.h2d_ns(entry_bytes);
  }
  // T_s's time over its fastest configuration, and its workspace over its smallest: per
  // configuration, or, fixed, a constant.
  std::vector<std::int64_t> fixed_ws(n, 0);
  for (int s = 0; s < n; ++s) {
    if (zcount[s] == 0) continue;
    const TaskCost& c = costs.tasks[order[s]];
    if (zbase[s] < 0) {
      tasks_ns += c.front[zfirst[s]].time_ns - c.time_ns;
      fixed_ws[s] = c.front[zfirst[s]].workspace_bytes;
      continue;
    }
    fixed_ws[s] = c.min_workspace;
    for (int k = 0; k < zcount[s]; ++k) ilp.objective[zbase[s] + k] = c.front[k].time_ns - c.time_ns;
  }
  for (int l : tg.route) {
    const int y = tg.y_of[l];
    if (y < 0 || !decided[y]) continue;
    redo_ns[y] = costs.tasks[costs.forward_task[l]].time_ns;
    for (int t = born[y] + 1; t <= last[y]; ++t) ilp.objective[R(y, t)] = redo_ns[y];
  }

  // Memory that does not depend on the decisions, per stage: resident tensors always; the other
  // undecided tensors from their first to their last touch; the task's smallest workspace.
  std::vector<std::int64_t> fixed(n, 0);
  std::int64_t resident = 0;
  for (const Tensor& x : tg.tensors)
    if (x.resident()) resident += aligned(x.bytes(b));
  std::vector<int> first_touch(nt, -1), last_touch(nt, -1);
  for (int s = 0; s < n; ++s)
    for (int x : tg.touched(tg.tasks[order[s]])) {
      if (first_touch[x] < 0) first_touch[x] = s;
      last_touch[x] = s;
      const Tensor& t = tg.tensors[x];
      if (t.host_input && !decided[x])
        fixed[s] += aligned(t.bytes(b));  // copied in when a task needs it: counted only there
    }
  for (int x = 0; x < nt; ++x) {
    const Tensor& t = tg.tensors[x];
    if (t.resident() || decided[x] || t.host_input || first_touch[x] < 0) continue;
    for (int s = first_touch[x]; s <= last_touch[x]; ++s) fixed[s] += aligned(t.bytes(b));
  }
  for (int s = 0; s < n; ++s) {
    fixed[s] += resident;
    if (tg.tasks[order[s]].conv_kernel) fixed[s] += aligned(fixed_ws[s]);
  }

  // The memory rows' unit: bytes rounded down (a relaxation), coarse enough for CBC's tolerances.
  const std::int64_t unit = std::max<std::int64_t>(kAlign, budget_bytes >> 15);
  for (int s = 0; s < n; ++s) {
    const Task& task = tg.tasks[order[s]];
    const std::vector<int> touched = tg.touched(task);
    std::int64_t need = fixed[s];
    std::vector<char> is_touched(nt, 0);
    for (int x : touched)
      if (decided[x]) {
        need += aligned(tg.tensors[x].bytes(b));
        is_touched[x] = 1;
      }
    if (need > budget_bytes) {  // this task alone does not fit: no recompute-only plan exists
      res.status = RematMilpResult::Status::infeasible;
      res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
      return res;
    }
    // T_s reads i: present, carried in or recomputed in this stage.
    for (int x : task.reads)
      if (decided[x] && born[x] != s) ilp.rows.push_back({{{R(x, s), 1}, {S(x, s), 1}}, IlpSense::ge, 1});
    // Memory when T_s runs.
    IlpRow mem;
    mem.sense = IlpSense::le;
    mem.rhs = (budget_bytes - need) / unit;
    for (int i = 0; i < nt; ++i)
      if (!is_touched[i] && in_span(i, s + 1)) {
        const std::int64_t c = aligned(tg.tensors[i].bytes(b)) / unit;
        if (c > 0) mem.terms.push_back({S(i, s + 1), c});
      }
    if (zbase[s] >= 0) {
      const TaskCost& c = costs.tasks[order[s]];
      IlpRow one;
      one.sense = IlpSense::eq;
      one.rhs = 1;
      for (int k = 0; k < zcount[s]; ++k) {
        one.terms.push_back({zbase[s] + k, 1});
        const std::int64_t extra = (aligned(c.front[k].workspace_bytes) - aligned(fixed_ws[s])) / unit;
        if (extra > 0) mem.terms.push_back({zbase[s] + k, extra});
      }
      ilp.rows.push_back(std::move(one));
    }
    if (!mem.terms.empty()) ilp.rows.push_back(std::move(mem));
  }
  for (int l : tg.route) {
    const int y = tg.y_of[l];
    if (y < 0 || !decided[y]) continue;
    for (int t = born[y] + 1; t <= last[y]; ++t) {
      for (int x : tg.tasks[costs.forward_task[l]].reads)
        if (decided[x]) {
          UCPLAN_CHECK(in_span(x, t), "a recomputation's input lives as long as its output may be recomputed");
          ilp.rows.push_back({{{R(y, t), 1}, {R(x, t), -1}, {S(x, t), -1}}, IlpSense::le, 0});
        }
      if (t < last[y]) ilp.rows.push_back({{{S(y, t + 1), 1}, {S(y, t), -1}, {R(y, t), -1}}, IlpSense::le, 0});
    }
  }

  // A first incumbent: keep nothing, recompute whatever each task needs, transitively, in its
  // stage. It always fits (nothing is carried), so the solver starts from a feasible point.
  ilp.start.assign(nv, 0);
  for (int s = 0; s < n; ++s) {
    std::vector<int> stack;
    for (int x : tg.tasks[order[s]].reads)
      if (decided[x] && born[x] != s) stack.push_back(x);
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      if (ilp.start[R(x, s)]) continue;
      ilp.start[R(x, s)] = 1;
      for (int in : tg.tasks[costs.forward_task[tg.tensors[x].layer]].reads)
        if (decided[in]) stack.push_back(in);
    }
  }
  for (int s = 0; s < n; ++s)
    if (zbase[s] >= 0) ilp.start[zbase[s]] = 1;  // the smallest workspace
  // Better, if it fits the rows: the given plan as the simulator ran it, stage by stage.
  if (start && start->on_device_at.size() == static_cast<std::size_t>(n) &&
      start->recomputed_at.size() == static_cast<std::size_t>(n) &&
      start->config_at.size() == static_cast<std::size_t>(n)) {
    std::vector<std::int64_t> x(nv, 0);
    for (int s = 0; s < n; ++s) {
      if (zbase[s] >= 0) x[zbase[s] + std::clamp(start->config_at[s], 0, zcount[s] - 1)] = 1;
      for (int i : start->on_device_at[s])
        if (in_span(i, s)) x[S(i, s)] = 1;
      for (int i : start->recomputed_at[s])
        if (in_span(i, s)) x[R(i, s)] = 1;
    }
    if (find_ilp_violation(ilp, x).empty()) {
      ilp.start = std::move(x);
      res.started_from_plan = true;
    }
  }
  ilp.max_seconds = max_seconds;
  // Plain branch and bound proves little here (12,000 binaries for ResNet-20, a weak LP bound at
  // tight budgets): CBC's full strategy (cuts, heuristics) gives both better bounds
  // and better solutions (resnet20 b64, model:h100, 30 s: at 85 % of the peak bound +3.4 % and
  // solution +4.6 % instead of +2.4 % and +5.4 %; at 70 % proven optimal in 20 s).
  // At tight budgets the weak link is the relaxation, not CBC. Measured on resnet20 b64,
  // model:h100, 25 % of the peak (12,229 binaries), the default's plan as the start: with CBC's
  // proximity search (-proximity on) the MILP's solution is 2.52 ms per round after 60 s where
  // CBC as configured here ends at its start (2.62 ms), yet the plan simulated from it is no
  // faster (2.62 ms): what the relaxation leaves out, the memory at the recomputations' own
  // moments, is what the simulation cannot fit. HiGHS 1.16 (PyPI, one thread, the same model)
  // ends 300 s with a solution 22 % lower in the objective and a bound no better (gap 55 %).
  // Counting those moments (per stage, B[t,k] >= S[t,k] + S[t+1,k] - R[t,k] - 1 for what stays
  // through the stage, and M_t >= the largest recomputation's output, inputs and workspace, with
  // resident and gradient bytes beside them under the budget; valid against the brute-force test)
  // was tried: on ResNet-20 b64 at 50 / 35 / 25 % of the peak the bound rose by 0.9 / -0.1 / 0.4
  // points (H100 model) and 0.1 / 0.5 points at 35 / 25 % (V100), still 21.5 % under the plan at
  // 25 % after 600 s (386 nodes, no better solution); on ResNet-50 b64 (106,000 variables instead
  // of 70,000) CBC's root did not end in 60 s, and the bound fell to the trivial one at 85 and
  // 35 % (from +2.5 and +7.4 %). Not kept.
  ilp.full_strategy = true;
  res.variables = nv;
  res.rows = static_cast<int>(ilp.rows.size());

  const IlpResult r = solve_ilp(ilp);
  res.nodes = r.nodes;
  res.plain_fallback = r.full_strategy_failures > 0;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  switch (r.status) {
    case IlpStatus::optimal:
      res.status = RematMilpResult::Status::optimal;
      break;
    case IlpStatus::feasible:
      res.status = RematMilpResult::Status::feasible;
      break;
    case IlpStatus::infeasible:
      res.status = RematMilpResult::Status::infeasible;
      return res;
    case IlpStatus::no_solution:
      res.status = RematMilpResult::Status::no_solution;
      return res;
  }
  res.bound_round_ns = tasks_ns + std::max<std::int64_t>(r.bound, 0);
  res.solution_round_ns = tasks_ns + r.objective;
  // As a table (a seed for the search): recomputed in the backward pass. Stage by stage: what
  // is recomputed anywhere may be dropped, and S says when.
  res.table.assign(nt, Residency::Keep);
  res.staged.table.assign(nt, Residency::Keep);
  res.staged.keep.assign(n, std::vector<char>(nt, 1));
  res.config.assign(tg.tasks.size(), -1);
  for (int s = 0; s < n; ++s) {
    if (zcount[s] == 0) continue;
    res.config[order[s]] = zfirst[s];
    if (zbase[s] >= 0)
      for (int k = 0; k < zcount[s]; ++k)
        if (r.x[zbase[s] + k]) res.config[order[s]] = k;
  }
  for (int i = 0; i < nt; ++i) {
    if (base[i] < 0) continue;
    for (int t = born[i] + 1; t <= last[i]; ++t) {
      if (r.x[R(i, t)]) (t >= bwd_start ? res.table[i] : res.staged.table[i]) = Residency::Recompute;
      res.staged.keep[t][i] = r.x[S(i, t)] ? 1 : 0;
    }
    if (res.table[i] == Residency::Recompute) res.staged.table[i] = Residency::Recompute;
  }
  return res;
}

}  // namespace ucplan
