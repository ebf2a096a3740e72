#include "remat_milp.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "planner/solve/ilp.h"
#include "planner/model/errors.h"
#include "planner/model/units.h"

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
std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

}  // namespace

RematMilp build_remat_milp(const Graph& g, const TaskGraph& tg, const CostTable& costs, std::int64_t budget_bytes,
                           double max_seconds, const ScheduleResult* start, const std::vector<int>& fixed_config,
                           bool offload) {
  const auto start_time = std::chrono::steady_clock::now();
  RematMilp milp;
  RematMilpResult res;
  res.offload = offload;
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

  // Variables R[t,i], S[t,i] (and with offload P[t,i], Y[t,i]) for t in (born_i, last_i].
  const int per = offload ? 4 : 2;
  std::vector<int> base(nt, -1);
  int nv = 0;
  for (int i = 0; i < nt; ++i)
    if (decided[i] && last[i] > born[i]) {
      base[i] = nv;
      nv += per * (last[i] - born[i]);
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
  // By value: the read-back of the answer (below) outlives this function's locals.
  auto R = [base, born, per](int i, int t) { return base[i] + per * (t - born[i] - 1); };
  auto S = [base, born, per](int i, int t) { return base[i] + per * (t - born[i] - 1) + 1; };
  auto P = [base, born, per](int i, int t) { return base[i] + per * (t - born[i] - 1) + 2; };
  auto Y = [&](int i, int t) { return base[i] + per * (t - born[i] - 1) + 3; };  // i's copy out ended by E_t
  // "i is on the device for stage t": kept, recomputed, or (with offload) brought back.
  auto there = [&](int i, int t, std::int64_t sign) {
    std::vector<IlpTerm> terms{{R(i, t), sign}, {S(i, t), sign}};
    if (offload) terms.push_back({P(i, t), sign});
    return terms;
  };

  Ilp ilp;
  ilp.objective.assign(nv, 0);
  std::vector<std::int64_t> redo_ns(nt, 0);
  // Every round starts with the first task's host inputs (the batch) copied in: no task can
  // start before they arrive, so that copy is part of the round of every plan that does not carry
  // the batch's input across rounds (plan.h), and of the bound; any_plan_bound_round_ns takes it
  // out for those that do.
  std::int64_t tasks_ns = 0;
  for (int task : order) tasks_ns += costs.tasks[task].time_ns;
  if (n > 0) {
    std::int64_t entry_bytes = 0;
    for (int x : tg.tasks[order[0]].reads)
      if (tg.tensors[x].host_input) entry_bytes += tg.tensors[x].bytes(b);
    if (entry_bytes > 0) res.entry_ns = costs.h2d_ns(entry_bytes);
    tasks_ns += res.entry_ns;
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

  // With offload, time: the moment m_s at which T_s starts, as E_s (m_0 = 0) in units of tu,
  // the stall w_s between m_s and m_{s+1} (T_s, then stage s+1's recomputations, then w_s), and
  // C_s, the host-to-device copy time of every arrival up to stage s. Compute times are rounded
  // up in E and copy times down, plus a unit per stage, so that every plan's moments satisfy the
  // rows; the objective counts tu per unit of stall, rounded down. Undecided tensors that are not
  // resident may be copied out and back between two stages that touch them (the engine offloads
  // any of them on demand): a gap variable G frees them in the stages between, if the copy fits.
  struct Gap {
    int tensor, from, to, var;
  };
  std::vector<Gap> gaps;
  std::vector<std::vector<int>> gaps_at(n);  // per stage: the gaps (indices) it lies inside
  const std::int64_t tu = std::max<std::int64_t>(1, tasks_ns >> 16);
  constexpr std::int64_t kCapUnits = std::int64_t{1} << 30;  // about 16,000 times the round: no plan is there
  std::vector<int> evar(n, -1), cvar(n, -1), wvar(n, -1);
  auto round_trip_units = [&](std::int64_t bytes) { return (costs.d2h_ns(bytes) + costs.h2d_ns(bytes)) / tu; };
  if (offload) {
    std::vector<std::vector<int>> touches(nt);
    for (int s = 0; s < n; ++s)
      for (int x : tg.touched(tg.tasks[order[s]])) touches[x].push_back(s);
    auto add_var = [&](std::int64_t cost, std::int64_t upper) {
      ilp.objective.push_back(cost);
      ilp.upper.resize(nv, 1);
      ilp.upper.push_back(upper);
      return nv++;
    };
    for (int x = 0; x < nt; ++x) {
      const Tensor& t = tg.tensors[x];
      if (t.resident() || decided[x] || t.host_input) continue;
      for (std::size_t k = 1; k < touches[x].size(); ++k) {
        const int a = touches[x][k - 1], c = touches[x][k];
        if (c <= a + 1) continue;
        gaps.push_back({x, a, c, add_var(0, 1)});
        for (int s = a + 1; s < c; ++s) gaps_at[s].push_back(static_cast<int>(gaps.size()) - 1);
      }
    }
    for (int s = 0; s < n; ++s) {
      if (s > 0) evar[s] = add_var(0, kCapUnits);
      if (s > 0) cvar[s] = add_var(0, kCapUnits);
      if (s + 1 < n) wvar[s] = add_var(tu, kCapUnits);
    }
    ilp.upper.resize(nv, 1);
  }
  auto elapsed = [&](std::vector<IlpTerm>& terms, int s, std::int64_t sign) {  // + sign * E_s (E_0 = 0)
    if (evar[s] >= 0) terms.push_back({evar[s], sign});
  };
  // A copy (or round trip) of `units` that the decision `var` needs fits between two moments:
  // E_to - E_from >= units * var.
  auto window = [&](int from, int to, int var, std::int64_t units) {
    IlpRow row{{}, IlpSense::ge, 0};
    elapsed(row.terms, to, 1);
    elapsed(row.terms, from, -1);
    if (units > 0) row.terms.push_back({var, -units});
    ilp.rows.push_back(std::move(row));
  };

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
    std::int64_t away = 0;  // what copies to the host could free (offload)
    for (int k : gaps_at[s]) away += aligned(tg.tensors[gaps[k].tensor].bytes(b));
    if (need - away > budget_bytes) {  // this task alone does not fit: no plan (of the MILP's kind) exists
      res.status = RematMilpResult::Status::infeasible;
      res.infeasible_why = fmt::format(
          "{} of layer {} needs {} at once (its own buffers, the weights and their gradients, the values "
          "alive across it such as gradients and saved statistics{}), over the {} budget",
          task_kind_name(task.kind), g.layers[task.layer].name(), format_bytes(need - away),
          offload ? ", less what copies to the host could free" : "", format_bytes(budget_bytes));
      res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
      milp.solve = false;
      milp.read = [res](const IlpResult&) { return res; };
      return milp;
    }
    // T_s reads i: present, carried in, recomputed or (offload) brought back in this stage.
    for (int x : task.reads)
      if (decided[x] && born[x] != s) ilp.rows.push_back({there(x, s, 1), IlpSense::ge, 1});
    // Memory when T_s runs.
    IlpRow mem;
    mem.sense = IlpSense::le;
    mem.rhs = floor_div(budget_bytes - need, unit);
    for (int k : gaps_at[s])
      mem.terms.push_back({gaps[k].var, -ceil_div(aligned(tg.tensors[gaps[k].tensor].bytes(b)), unit)});
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
          std::vector<IlpTerm> terms = there(x, t, -1);
          terms.push_back({R(y, t), 1});
          ilp.rows.push_back({std::move(terms), IlpSense::le, 0});
        }
      if (t < last[y]) {
        std::vector<IlpTerm> terms = there(y, t, -1);
        terms.push_back({S(y, t + 1), 1});
        ilp.rows.push_back({std::move(terms), IlpSense::le, 0});
      }
    }
  }
  // Time (offload): E_{s+1} = E_s + T_s + stage s+1's recomputations + w_s (+ a unit), each
  // arrival's copy out (after m_born) and back (before m_t) fits between those moments, and the
  // host-to-device stream carries every arrival up to stage s before m_s.
  // The time T_s takes at a configuration (its fastest when it has no choice), rounded up.
  std::vector<std::int64_t> task_units(n, 0);
  struct Absent {
    int tensor, stage, var, next;  // A[stage, tensor], and A[stage + 1, tensor] (-1: stage is the read)
  };
  std::vector<Absent> absent;  // in decreasing stage order within each read's window
  if (offload) {
    for (int s = 0; s < n; ++s) {
      const TaskCost& c = costs.tasks[order[s]];
      const std::int64_t own = zcount[s] > 0 && zbase[s] < 0 ? c.front[zfirst[s]].time_ns : c.time_ns;
      task_units[s] = ceil_div(own, tu) + 1;
    }
    for (int s = 0; s + 1 < n; ++s) {
      IlpRow row;
      row.sense = IlpSense::eq;
      row.rhs = task_units[s];
      elapsed(row.terms, s + 1, 1);
      elapsed(row.terms, s, -1);
      row.terms.push_back({wvar[s], -1});
      for (int i = 0; i < nt; ++i)
        if (in_span(i, s + 1) && redo_ns[i] > 0) row.terms.push_back({R(i, s + 1), -ceil_div(redo_ns[i], tu)});
      if (zbase[s] >= 0) {
        const TaskCost& c = costs.tasks[order[s]];
        for (int k = 0; k < zcount[s]; ++k) {
          const std::int64_t extra = ceil_div(c.front[k].time_ns - c.time_ns, tu);
          if (extra > 0) row.terms.push_back({zbase[s] + k, -extra});
        }
      }
      ilp.rows.push_back(std::move(row));
    }
    // The copy out: Y[t,i] = 1 once it has ended (by E_t), never undone; a copy back needs it; it
    // takes d2h_i after i's birth, on the one device-to-host stream; and until it has ended, a
    // tensor that is brought back later (Y[last_i,i] = 1) is still on the device (its buffer is
    // being read), so it is counted in the memory rows: S[s+1,i] >= Y[last_i,i] - Y[s,i].
    std::vector<std::vector<IlpTerm>> outs(n);  // per stage: d2h units of the copies out ended by then
    for (int i = 0; i < nt; ++i) {
      if (base[i] < 0) continue;
      const std::int64_t out = costs.d2h_ns(tg.tensors[i].bytes(b)) / tu;
      for (int t = born[i] + 1; t <= last[i]; ++t) {
        if (t < last[i]) ilp.rows.push_back({{{Y(i, t), 1}, {Y(i, t + 1), -1}}, IlpSense::le, 0});
        ilp.rows.push_back({{{P(i, t), 1}, {Y(i, t), -1}}, IlpSense::le, 0});
        if (t < last[i]) {
          std::vector<IlpTerm> stay{{S(i, t + 1), 1}, {Y(i, last[i]), -1}, {Y(i, t), 1}};
          ilp.rows.push_back({std::move(stay), IlpSense::ge, 0});
        }
        window(born[i], t, Y(i, t), out);
        if (out > 0) outs[t].push_back({Y(i, t), out});
      }
      // Its copy out cannot have ended when it is born: it is there when the next stage starts.
      ilp.rows.push_back({{{S(i, born[i] + 1), 1}, {Y(i, last[i]), -1}}, IlpSense::ge, 0});
    }
    // What leaves the device is copied out first, unless it is recomputed before its next read:
    // i absent when stage s starts and read at stage u >= s was brought back (so its copy out had
    // ended before it left, by E_s) or is recomputed in a stage of [s, u]:
    //   S[s,i] + Y[s,i] + A[s,i] >= 1,   A[s,i] <= R[s,i] + A[s+1,i] (s < u),   A[u,i] <= R[u,i],
    // A[s,i] = 1: i is absent at stage s and recomputed by its next read. Every plan's stages
    // satisfy these rows. Without them the relaxation kept half of a tensor, copied out the other
    // half late and brought that half back (P <= Y holds stage by stage, not since it left), or
    // brought back a tenth in each of ten stages after copying out a tenth: on resnet20 b64,
    // model:h100, its LP found rounds with no overhead at 70, 50 and 35 % of the peak and 6.9 us
    // at 25 %; with them 5.0, 34.2, 61.2 and 88.3 us.
    std::vector<std::vector<int>> reads_of(nt);
    for (int s = 0; s < n; ++s)
      for (int x : tg.tasks[order[s]].reads)
        if (base[x] >= 0 && born[x] != s && (reads_of[x].empty() || reads_of[x].back() != s)) reads_of[x].push_back(s);
    for (int i = 0; i < nt; ++i) {
      int prev = born[i];
      for (int u : reads_of[i]) {
        int next = -1;  // A[s+1,i]
        for (int s = u; s > prev; --s) {
          const int a = nv++;
          ilp.objective.push_back(0);
          absent.push_back({i, s, a, s < u ? next : -1});
          std::vector<IlpTerm> chain{{a, 1}, {R(i, s), -1}};
          if (s < u) chain.push_back({next, -1});
          ilp.rows.push_back({std::move(chain), IlpSense::le, 0});
          ilp.rows.push_back({{{S(i, s), 1}, {Y(i, s), 1}, {a, 1}}, IlpSense::ge, 1});
          next = a;
        }
        prev = u;
      }
    }
    ilp.upper.resize(nv, 1);
    std::vector<std::vector<IlpTerm>> arrivals(n);  // per stage: h2d units of what arrives for it
    for (int i = 0; i < nt; ++i) {
      if (base[i] < 0) continue;
      const std::int64_t bytes = tg.tensors[i].bytes(b);
      const std::int64_t trip = round_trip_units(bytes), in = costs.h2d_ns(bytes) / tu;
      for (int t = born[i] + 1; t <= last[i]; ++t) {
        window(born[i], t, P(i, t), trip);
        if (in > 0) arrivals[t].push_back({P(i, t), -in});
      }
    }
    for (const Gap& gp : gaps) {
      const std::int64_t bytes = tg.tensors[gp.tensor].bytes(b);
      window(gp.from, gp.to, gp.var, round_trip_units(bytes));
      if (const std::int64_t in = costs.h2d_ns(bytes) / tu; in > 0) arrivals[gp.to].push_back({gp.var, -in});
    }
    for (int s = 1; s < n; ++s) {
      IlpRow cum{std::move(arrivals[s]), IlpSense::eq, 0};  // C_s = C_{s-1} + arrivals
      cum.terms.push_back({cvar[s], 1});
      if (cvar[s - 1] >= 0) cum.terms.push_back({cvar[s - 1], -1});
      ilp.rows.push_back(std::move(cum));
      // C_s <= E_s, and the copies out ended by then <= E_s: both within E_s on one copy engine.
      IlpRow by{{{cvar[s], 1}}, IlpSense::le, 0};
      IlpRow down{std::move(outs[s]), IlpSense::le, 0};
      if (!costs.duplex) {
        by.terms.insert(by.terms.end(), down.terms.begin(), down.terms.end());
        down.terms.clear();
      }
      elapsed(by.terms, s, -1);
      ilp.rows.push_back(std::move(by));
      if (!down.terms.empty()) {
        elapsed(down.terms, s, -1);
        ilp.rows.push_back(std::move(down));
      }
    }
  }
  // A start's moments: no stall, no copy (the starts below neither offload nor bring back).
  auto set_moments = [&](std::vector<std::int64_t>& x) {
    if (!offload) return;
    std::int64_t e = 0;
    for (int s = 0; s + 1 < n; ++s) {
      e += task_units[s];
      for (int i = 0; i < nt; ++i)
        if (in_span(i, s + 1) && x[R(i, s + 1)]) e += ceil_div(redo_ns[i], tu);
      if (zbase[s] >= 0) {
        const TaskCost& c = costs.tasks[order[s]];
        for (int k = 0; k < zcount[s]; ++k)
          if (x[zbase[s] + k]) e += std::max<std::int64_t>(0, ceil_div(c.front[k].time_ns - c.time_ns, tu));
      }
      x[evar[s + 1]] = e;
    }
    for (const Absent& a : absent)  // 1 at a recomputation and at the stages of its window before it
      x[a.var] = std::min<std::int64_t>(1, x[R(a.tensor, a.stage)] + (a.next >= 0 ? x[a.next] : 0));
  };

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
  set_moments(ilp.start);
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
    set_moments(x);
    if (find_ilp_violation(ilp, x).empty()) {
      ilp.start = std::move(x);
      res.started_from_plan = true;
    }
  }
  ilp.max_seconds = max_seconds;
  // Without a time limit the recompute-only MILP is solved to optimality. The MILP with offload
  // is not: its LP bound is weak (the copies' fractions cost little in the relaxation), and exact
  // mode's test on the four test networks had not ended after 19 minutes with it unlimited. It
  // stops after kOffloadNodes nodes instead, which keeps it deterministic.
  constexpr std::int64_t kOffloadNodes = 100;
  if (offload && max_seconds <= 0) ilp.max_nodes = kOffloadNodes;
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
  // Which side of the gap is loose, measured on resnet20 b64, model:h100, 35 % of the peak, the
  // default's plan without offload as the start (a round of 2.14 ms; bound 1.95 ms after 45 s):
  // 900 s of CBC (9,834 nodes) raised the bound to 1.96 ms and found no better solution; a large-
  // neighbourhood search (all of R and S free for 8 or 20 consecutive activations of the route,
  // the rest fixed at the incumbent, CBC on each part, sliding by half a part, until a sweep gains
  // nothing) lowered the MILP's objective by 6.6 us in 40 s, and the plan simulated from it was no
  // faster. The start is thus near a local optimum of the MILP itself, which points at the
  // relaxation as the loose side (not a proof). Not kept.
  // The same at 70 %, with offload (exact mode with a 400 s limit instead of 60 s): the MILP with
  // offload ran 16 nodes instead of 0, its bound rose from +0.3 to +0.4 % over the ideal, and
  // neither MILP found a solution better than its start (the recompute-only one after 7,389
  // nodes); the plan stayed +2.3 %. Its trace shows why offload cannot replace its last four
  // recomputations (12.7 us convs of layer1): the device-to-host stream is busy 528 of the
  // forward pass's 652 us. At 25 % the plan's 254 us of stalls are layer1's skip gradients,
  // copied out and back while the block's own backward pass fills the memory; nothing can
  // recompute a gradient.
  // Coarser copies of every memory row (rank-1 Chvatal-Gomory rounding: coefficients and free
  // bytes in units of the three most common activation sizes, 4, 2 and 1 MiB on ResNet-20 b64)
  // moved the 60 s bounds at 50 / 35 / 25 % of the peak by +0.1 / +0.2 / +1.3 points (H100 model)
  // and +0.4 / +0.1 / -0.5 points (V100): CBC's own cuts find most of that. Not kept.
  // Two valid strengthenings of the MILP with offload, measured on resnet20 b64, model:h100 (its
  // LP solved apart by HiGHS 1.16 from the MPS): what its LP does at 50 % of the peak is recompute
  // the stem's and layer1's ReLU outputs a fraction of a per cent per stage all through the
  // backward pass from 2.4-2.9 % of their batch-norm outputs, brought back once: the same slice
  // of the input serves every slice of the output, which no plan can do. (a) Memory of copies back
  // under way (a buffer exists from its copy's start: F_s >= the large arrivals for s+1..t less
  // what the stream can carry between T_s and m_t, for every t, 14,000 rows): the LP's optimum
  // stayed 34.2 us over the round with the batch's copy, the 60 s bound fell from 1.79 to 1.75 ms
  // (the LP no longer ended) and stayed 1.76 ms at 70 %; it held against brute force. (b) What
  // is built in a window needs its input there at least once: S[c,y] - S[a,y] - Σ_[a,c) P[t,y]
  // <= there(x,a) + Σ_(a,c) (R[t,x] + P[t,x]) per recomputation input x of y, read c of y and
  // stage a (5,086 rows, 847,000 non-zeros): the LP rose to 42.3 us (+0.4 points) and took 239 s
  // instead of 110 s, now copying 0.8 % of each batch-norm output out once and back in every
  // stage. Neither kept: the slices are the relaxation's weakness, and rows cannot name them.
  // Nor does splitting the route into windows of consecutive stages, each solved to integrality
  // (the MILP with only that window's stages in the objective and only the rows whose variables all
  // lie in it: the sum of the windows' optima bounds the whole, and small MILPs close). What a
  // window may hold when it starts comes free, and that is where tight budgets cost: on resnet20
  // b64, model:h100, 25 % of the peak, recompute-only, 4 windows with 20 s each summed to 235 us
  // over the round's tasks and 16 windows (each proven optimal) to 131 us, against the whole
  // MILP's 300 us bound in 60 s.
  // Nor does timing a gap's absence stage by stage (the plan's stalls at 25 % are gradients' round
  // trips): F[s] <= G frees the tensor at stage s of the gap only if its copy out fits between
  // m_from and m_s and its copy back between m_s and m_to, the copy out on the device-to-host
  // stream by m_s (1,885 variables more on resnet20 b64, model:h100, 25 % of the peak). Its LP
  // optimum (HiGHS 1.16 from the MPS, in its objective's units) rose by 0.1 %, 88,370 against
  // 88,260: the LP frees memory elsewhere, not through the gaps; solved in 51 s instead of 42 s,
  // and CBC's 60 s bound fell from +4.8 to +1.4 % over the ideal at 25 % and from +1.8 to +1.5 %
  // at 50 %. Not kept.
  // Nor does giving the device-to-host stream release times: the copies out of what was born at
  // stage a or later and ended by m_s fit between m_a and m_s, for every such a and s (5,856 rows
  // more; the rows above have a = 0 only). The LP optimum rose by 1.9 % of itself at 25 % of the
  // peak (89,901 against 88,260) and not at all at 70 % (5,012 both): the streams' timing is not
  // where the relaxation is loose.
  // Nor does counting a copy back's buffer from its start (2026-12-03; benchmarks/
  // plan-quality-history.md): for every k < t where the stages
  // between cannot hide the copy, mem_k + bytes_i P[t,i] - κ_i (E_t - E_k - T_k + 2) <= budget,
  // κ_i >= bytes_i / h2d_i (the copy starts before T_k ends unless the time from T_k's end to m_t
  // is at least h2d_i), 1,522 rows on resnet20 b64. It held against test_passes' brute force over
  // tables, and on a tiny residual network (conv, relu, conv, bn, relu, conv, add; b16,
  // model:v100, solved to optimality) raised the bound at 60 / 50 % of the peak from 181 to 185 /
  // 196 us a round. On resnet20 b64, model:h100, exact mode's 60 s LP no longer ended at 25 % of
  // the peak: any-plan bound +3.4 -> +0.0 % (at 50 and 35 % it ends in neither). Not kept. The
  // tiny network also shows what a linear row cannot say: at 90 % the MILP is optimal with no
  // overhead, copying out the first ReLU's output and bringing it back for c1's backward, its
  // copy back's buffer counted in r1's backward only in part (b1's backward, the stage between,
  // takes 8.9 of the copy's 21 us); the engine runs that table in 184.8 us a round with the input
  // carried (the prefetch waits 12 us for r1's backward to free memory), and brute force over all
  // 3^10 keep / offload / recompute tables, three placements and a pool, with and without the
  // carried input, gives 183.0 us (the search's plan: one conv recomputed).
  // Nor does another solver on the same model. CP-SAT (OR-Tools 9.15 from PyPI, 2 workers, 60 s,
  // the default's plan as its hint; there is no OR-Tools in Debian for a C++ build) on the
  // recompute-only MILP of resnet20 b64, model:h100, 25 % of the peak, measured 2026-12-03: its
  // large-neighbourhood search lowered the objective from the start's 817 us to 663 us over the
  // round's tasks (a round of 2.41 ms, where CBC in the same 60 s ended at 2.56 ms), but its bound
  // stayed at 5 us (CBC's: 270 us, a round of 2.02 ms). Its solution, read back in CBC's place, gave
  // no better plan: simulated stage by stage it takes 2.80-3.70 ms per round or does not fit, the
  // search seeded with it 2.42 ms, and the plan stays the default's 2.35 ms. A better MILP
  // solution is not a better plan while the MILP leaves out the memory at the recomputations' own
  // moments and the arena's placement; and the bound, not the solution, is what keeps the gap open.
  ilp.full_strategy = true;
  res.variables = nv;
  res.rows = static_cast<int>(ilp.rows.size());

  milp.ilp = std::move(ilp);
  // The read-back keeps copies of what it needs (the graphs need not outlive the build).
  milp.read = [res, start_time, tasks_ns, nt, n, ntasks = tg.tasks.size(), order, zfirst, zbase, zcount, base, born,
               last, R, S, P, bwd_start, offload](const IlpResult& r) {
    RematMilpResult out = res;
    out.nodes = r.nodes;
    out.plain_fallback = r.full_strategy_failures > 0;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    switch (r.status) {
      case IlpStatus::optimal:
        out.status = RematMilpResult::Status::optimal;
        break;
      case IlpStatus::feasible:
        out.status = RematMilpResult::Status::feasible;
        break;
      case IlpStatus::infeasible:
        out.status = RematMilpResult::Status::infeasible;
        return out;
      case IlpStatus::no_solution:
        out.status = RematMilpResult::Status::no_solution;
        return out;
    }
    out.bound_round_ns = tasks_ns + std::max<std::int64_t>(r.bound, 0);
    out.solution_round_ns = tasks_ns + r.objective;
    // As a table (a seed for the search): recomputed in the backward pass. Stage by stage: what
    // is recomputed anywhere may be dropped, and S says when.
    out.table.assign(nt, Residency::Keep);
    out.staged.table.assign(nt, Residency::Keep);
    out.staged.keep.assign(n, std::vector<char>(nt, 1));
    out.config.assign(ntasks, -1);
    for (int s = 0; s < n; ++s) {
      if (zcount[s] == 0) continue;
      out.config[order[s]] = zfirst[s];
      if (zbase[s] >= 0)
        for (int k = 0; k < zcount[s]; ++k)
          if (r.x[zbase[s] + k]) out.config[order[s]] = k;
    }
    for (int i = 0; i < nt; ++i) {
      if (base[i] < 0) continue;
      bool back = false;  // brought back from the host somewhere: offloaded
      for (int t = born[i] + 1; t <= last[i]; ++t) {
        if (r.x[R(i, t)]) (t >= bwd_start ? out.table[i] : out.staged.table[i]) = Residency::Recompute;
        out.staged.keep[t][i] = r.x[S(i, t)] ? 1 : 0;
        back = back || (offload && r.x[P(i, t)]);
      }
      if (out.table[i] == Residency::Recompute) out.staged.table[i] = Residency::Recompute;
      if (back) out.table[i] = out.staged.table[i] = Residency::Offload;
    }
    return out;
  };
  return milp;
}

RematMilpResult solve_remat_milp(const Graph& g, const TaskGraph& tg, const CostTable& costs, std::int64_t budget_bytes,
                                 double max_seconds, const ScheduleResult* start, const std::vector<int>& fixed_config,
                                 bool offload) {
  const RematMilp milp = build_remat_milp(g, tg, costs, budget_bytes, max_seconds, start, fixed_config, offload);
  return milp.read(milp.solve ? solve_ilp(milp.ilp) : IlpResult{});
}

}  // namespace ucplan
