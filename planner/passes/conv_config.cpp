#include "conv_config.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include "planner/solve/mckp.h"
#include "planner/model/errors.h"

namespace ucplan {

namespace {

// ---- Options in canonical order ------------------------------------------------------------
//
// Options are ranked by micro-batch descending, then algorithm ascending; a configuration is a
// multiset of ranks, listed ascending (the canonical list). Its key is (time, count, list) with
// lists of equal length compared lexicographically. The key is a total order on configurations
// that is compatible with concatenation: time and count add, and for equal counts comparing
// sorted lists lexicographically is comparing count vectors, which adding the same multiset
// does not change. So "keep the smaller key" is exact inside the DP, and the tie-break promised
// in the header (fewest micro-batches, then canonical list) is the global one, not a local one.

bool canonical_less(const MicroOption& a, const MicroOption& b) {
  if (a.micro_batch != b.micro_batch) return a.micro_batch > b.micro_batch;
  return a.algo < b.algo;
}

void check_options(const std::vector<MicroOption>& options, std::int64_t batch) {
  UCPLAN_CHECK(batch >= 1, "conv configuration for a batch of " + std::to_string(batch));
  std::vector<const MicroOption*> sorted;
  for (const MicroOption& o : options) {
    UCPLAN_CHECK(o.micro_batch >= 1 && o.time_ns >= 0 && o.workspace_bytes >= 0,
                 "bad micro option " + o.algo + " x" + std::to_string(o.micro_batch));
    // Any configuration's time is at most batch * max time: keep sums in 64 bits.
    UCPLAN_CHECK(o.time_ns <= std::numeric_limits<std::int64_t>::max() / batch,
                 "micro option time too large: " + o.algo);
    sorted.push_back(&o);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const MicroOption* a, const MicroOption* b) { return canonical_less(*a, *b); });
  for (std::size_t i = 1; i < sorted.size(); ++i)
    UCPLAN_CHECK(canonical_less(*sorted[i - 1], *sorted[i]),
                 "micro option listed twice: " + sorted[i]->algo + " x" + std::to_string(sorted[i]->micro_batch));
}

// The options usable for `batch` within `ws_limit`, in canonical order, without those that can
// never be part of a front configuration: within one micro-batch size an option is dropped when
// another one has a smaller-or-equal key (time, then rank) and no more workspace (replacing it
// gives a configuration at least as good in every respect). With `keep_one`, only the smallest
// key of each size is kept (enough when workspace is not an objective, as in WR).
std::vector<MicroOption> usable_options(const std::vector<MicroOption>& options, std::int64_t batch,
                                        std::int64_t ws_limit, bool keep_one) {
  std::vector<MicroOption> v;
  for (const MicroOption& o : options)
    if (o.micro_batch <= batch && o.workspace_bytes <= ws_limit) v.push_back(o);
  std::sort(v.begin(), v.end(), canonical_less);
  std::vector<MicroOption> kept;
  for (std::size_t lo = 0; lo < v.size();) {
    std::size_t hi = lo;
    while (hi < v.size() && v[hi].micro_batch == v[lo].micro_batch) ++hi;
    std::vector<std::size_t> by_key(hi - lo);
    std::iota(by_key.begin(), by_key.end(), lo);
    std::stable_sort(by_key.begin(), by_key.end(),
                     [&](std::size_t a, std::size_t b) { return v[a].time_ns < v[b].time_ns; });
    std::vector<std::size_t> keep;
    for (std::size_t i : by_key) {
      if (!keep.empty() && (keep_one || v[i].workspace_bytes >= v[keep.back()].workspace_bytes)) continue;
      keep.push_back(i);
    }
    std::sort(keep.begin(), keep.end());
    for (std::size_t i : keep) kept.push_back(v[i]);
    lo = hi;
  }
  return kept;
}

// ---- Configurations as chains --------------------------------------------------------------
//
// A configuration for b samples is its first (smallest-rank) option `head` followed by a
// configuration for b - micro_batch(head) whose ranks are all >= head: a node of that smaller
// front. Building configurations only this way lists every multiset once (no permutations).

struct Node {
  std::int64_t time = 0;
  std::int32_t count = 0;
  std::int32_t ws = -1;    // rank of the workspace among the distinct option workspaces; -1: none
  std::int32_t head = -1;  // option rank; -1: the empty configuration
  std::int32_t rest = -1;  // index in the front for b - micro_batch(head)
};

struct Chains {
  const std::vector<MicroOption>* opt = nullptr;
  std::vector<std::vector<Node>> at;  // at[b]: the nodes kept for b samples
};

// Lexicographic comparison of two canonical lists of equal length: -1, 0 or 1. The lists are
// the chains starting at at[b1][i1] and at[b2][i2].
int compare_lists(const Chains& c, std::int64_t b1, int i1, std::int64_t b2, int i2) {
  while (!(b1 == b2 && i1 == i2)) {  // a shared tail is equal
    const Node& n1 = c.at[b1][i1];
    const Node& n2 = c.at[b2][i2];
    if (n1.head != n2.head) return n1.head < n2.head ? -1 : 1;
    if (n1.head < 0) return 0;
    b1 -= (*c.opt)[n1.head].micro_batch;
    b2 -= (*c.opt)[n2.head].micro_batch;
    i1 = n1.rest;
    i2 = n2.rest;
  }
  return 0;
}

// A candidate for b samples: option `head` followed by node `rest` of at[b - micro_batch(head)].
struct Cand {
  std::int64_t time = 0;
  std::int32_t count = 0;
  std::int32_t head = -1;
  std::int32_t rest = -1;
};

bool key_less(const Chains& c, std::int64_t b, const Cand& x, const Cand& y) {
  if (x.time != y.time) return x.time < y.time;
  if (x.count != y.count) return x.count < y.count;
  if (x.head != y.head) return x.head < y.head;
  const std::int64_t rb = b - (*c.opt)[x.head].micro_batch;
  return compare_lists(c, rb, x.rest, rb, y.rest) < 0;
}

ConvConfig materialize(const Chains& c, std::int64_t b, int i) {
  ConvConfig cfg;
  for (const Node* n = &c.at[b][i]; n->head >= 0; n = &c.at[b][i]) {
    const MicroOption& o = (*c.opt)[n->head];
    cfg.micro.push_back({o.algo, o.micro_batch});
    cfg.time_ns += o.time_ns;
    cfg.workspace_bytes = std::max(cfg.workspace_bytes, o.workspace_bytes);
    b -= o.micro_batch;
    i = n->rest;
  }
  return cfg;
}

// ---- WD helpers ----------------------------------------------------------------------------

// One kernel's usable configurations for WD: indices into its list, Pareto-filtered (a dominated
// configuration can always be swapped for its dominator without losing feasibility or time),
// workspace ascending and time strictly descending; equal points keep the earliest index.
std::vector<int> wd_candidates(const std::vector<ConvConfig>& front) {
  std::vector<int> idx(front.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    if (front[a].workspace_bytes != front[b].workspace_bytes)
      return front[a].workspace_bytes < front[b].workspace_bytes;
    return front[a].time_ns < front[b].time_ns;
  });
  std::vector<int> keep;
  for (int i : idx) {
    UCPLAN_CHECK(front[i].time_ns >= 0 && front[i].workspace_bytes >= 0,
                 "configuration with negative time or workspace");
    if (keep.empty() || front[i].time_ns < front[keep.back()].time_ns) keep.push_back(i);
  }
  return keep;
}

}  // namespace

// ---- pareto_front: the DP of §III-C ---------------------------------------------------------
//
// C(b) = D( ∪_{option o, mb(o) <= b} ∪_{c ∈ C(b - mb(o))} {o} + c ),  C(0) = {∅}.
// Pruning with D at every b loses no optimum because both criteria are monotone under
// concatenation: if c' is no slower and needs no more workspace than c, then {o}+c' (time
// t_o + T(c'), workspace max(w_o, M(c'))) is no slower and needs no more than {o}+c. We prune on
// (key, workspace) rather than (time, workspace) so that equal points keep the tie-break winner;
// the (time, workspace) front is filtered out of C(B) at the end.
std::vector<ConvConfig> pareto_front(const std::vector<MicroOption>& options, std::int64_t batch) {
  check_options(options, batch);
  const std::vector<MicroOption> opt = usable_options(options, batch, std::numeric_limits<std::int64_t>::max(), false);

  // Workspaces as ranks, so a configuration's workspace is an index into `best` below.
  std::vector<std::int64_t> ws_values;
  for (const MicroOption& o : opt) ws_values.push_back(o.workspace_bytes);
  std::sort(ws_values.begin(), ws_values.end());
  ws_values.erase(std::unique(ws_values.begin(), ws_values.end()), ws_values.end());
  std::vector<std::int32_t> ws_rank(opt.size());
  for (std::size_t o = 0; o < opt.size(); ++o)
    ws_rank[o] =
        std::int32_t(std::lower_bound(ws_values.begin(), ws_values.end(), opt[o].workspace_bytes) - ws_values.begin());

  Chains c;
  c.opt = &opt;
  c.at.resize(batch + 1);
  c.at[0].push_back(Node{});
  std::vector<Cand> best(ws_values.size());
  std::vector<char> has(ws_values.size());
  for (std::int64_t b = 1; b <= batch; ++b) {
    std::fill(has.begin(), has.end(), 0);
    // Best key per workspace over all candidates {o} + c.
    for (int o = 0; o < int(opt.size()); ++o) {
      const std::int64_t rb = b - opt[o].micro_batch;
      if (rb < 0) continue;
      const std::vector<Node>& rest = c.at[rb];
      for (int i = 0; i < int(rest.size()); ++i) {
        const Node& n = rest[i];
        if (n.head >= 0 && n.head < o) continue;  // not canonical: generated from its head
        const Cand x{n.time + opt[o].time_ns, n.count + 1, o, i};
        const std::int32_t w = std::max(n.ws, ws_rank[o]);
        if (!has[w] || key_less(c, b, x, best[w])) {
          best[w] = x;
          has[w] = 1;
        }
      }
    }
    // D on (key, workspace): workspace ascending, keep strictly decreasing keys.
    std::vector<Node>& front = c.at[b];
    int last = -1;
    for (int w = 0; w < int(ws_values.size()); ++w) {
      if (!has[w]) continue;
      if (last >= 0 && !key_less(c, b, best[w], best[last])) continue;
      front.push_back(Node{best[w].time, best[w].count, w, best[w].head, best[w].rest});
      last = w;
    }
  }

  // The (time, workspace) front: of equal times keep the smallest workspace. That entry is the
  // smallest key of its point, because the (key, workspace) front contains it.
  std::vector<ConvConfig> out;
  const std::vector<Node>& top = c.at[batch];
  for (int i = 0; i < int(top.size()); ++i) {
    if (!out.empty() && top[i].time >= out.back().time_ns) continue;
    out.push_back(materialize(c, batch, i));
    UCPLAN_CHECK(out.back().time_ns == top[i].time, "front time mismatch");
  }
  return out;
}

std::optional<ConvConfig> fastest_within(const std::vector<ConvConfig>& front, std::int64_t workspace_limit) {
  const ConvConfig* best = nullptr;
  for (const ConvConfig& c : front) {
    if (c.workspace_bytes > workspace_limit) continue;
    if (!best || c.time_ns < best->time_ns || (c.time_ns == best->time_ns && c.workspace_bytes < best->workspace_bytes))
      best = &c;
  }
  if (!best) return std::nullopt;
  return *best;
}

// ---- wr_optimal: T(b) of §III-B -------------------------------------------------------------
//
// T(b) = min over options o (workspace <= limit, mb(o) <= b) of t_o + T(b - mb(o)), T(0) = 0,
// with the same key as above (so the minimiser is unique). Restricting o to the head of the
// configuration loses nothing: the rest of an optimal configuration is optimal for its size.
std::optional<ConvConfig> wr_optimal(const std::vector<MicroOption>& options, std::int64_t batch,
                                     std::int64_t workspace_limit) {
  check_options(options, batch);
  const std::vector<MicroOption> opt = usable_options(options, batch, workspace_limit, true);
  Chains c;
  c.opt = &opt;
  c.at.resize(batch + 1);
  c.at[0].push_back(Node{});
  for (std::int64_t b = 1; b <= batch; ++b) {
    std::optional<Cand> best;
    for (int o = 0; o < int(opt.size()); ++o) {
      const std::int64_t rb = b - opt[o].micro_batch;
      if (rb < 0 || c.at[rb].empty()) continue;
      const Node& n = c.at[rb][0];
      if (n.head >= 0 && n.head < o) continue;
      const Cand x{n.time + opt[o].time_ns, n.count + 1, o, 0};
      if (!best || key_less(c, b, x, *best)) best = x;
    }
    if (best) c.at[b].push_back(Node{best->time, best->count, -1, best->head, best->rest});
  }
  if (c.at[batch].empty()) return std::nullopt;
  return materialize(c, batch, 0);
}

// ---- solve_wd: Eqs. (1)-(4) of §III-C -------------------------------------------------------
//
// 1. Each kernel's list is Pareto-filtered, and its smallest workspace is taken off both its
//    configurations and the total (the row then counts only the extra workspace bought); the
//    cost of a configuration is its time over the kernel's fastest. If every kernel's fastest
//    configuration fits, that is the answer.
// 2. The exact reduction of reduce_mckp in bytes: a feasible incumbent, and per kernel the
//    configurations that can still beat it. Kernels left with one are decided.
// 3. The rest (the core) goes to CBC. Bytes are too fine for CBC (ilp.h), so the core's workspace
//    row is put in a power-of-two unit u with every weight at most 2^16 u. Weights rounded down
//    give a relaxation: its optimum bounds the byte-exact optimum from below, and its answer is
//    optimal when it fits in bytes (the usual case). Otherwise weights rounded up (capacity
//    down) give a conservative problem whose answer always fits; it is proven optimal when its
//    time equals the bound, and is never slower than the byte-exact optimum for the total
//    reduced by u bytes per core kernel. With u = 1 both are the exact problem (one solve).
// 4. When that leaves the answer unproven, Pareto sums in bytes (solve_mckp_pareto) improve it to
//    the byte-exact optimum, or prove it is one, unless a kernel's sums pass kParetoSums.
constexpr std::size_t kParetoSums = std::size_t(1) << 18;

std::optional<WdSolution> solve_wd(const std::vector<std::vector<ConvConfig>>& fronts, std::int64_t total_workspace) {
  const int kernels = int(fronts.size());
  std::vector<std::vector<int>> cand(kernels);
  Wide base = 0;
  for (int k = 0; k < kernels; ++k) {
    cand[k] = wd_candidates(fronts[k]);
    if (cand[k].empty()) return std::nullopt;
    base += fronts[k][cand[k][0]].workspace_bytes;
  }
  if (base > total_workspace) return std::nullopt;
  const std::int64_t slack = std::int64_t(total_workspace - base);

  Mckp bytes;
  bytes.capacity = slack;
  Wide fastest_extra = 0;
  for (int k = 0; k < kernels; ++k) {
    const std::int64_t w0 = fronts[k][cand[k][0]].workspace_bytes;
    while (fronts[k][cand[k].back()].workspace_bytes - w0 > slack) cand[k].pop_back();
    const std::int64_t t_fast = fronts[k][cand[k].back()].time_ns;
    bytes.cost.emplace_back();
    bytes.weight.emplace_back();
    for (int i : cand[k]) {
      bytes.cost[k].push_back(fronts[k][i].time_ns - t_fast);
      bytes.weight[k].push_back(fronts[k][i].workspace_bytes - w0);
    }
    fastest_extra += bytes.weight[k].back();
  }

  WdSolution sol;
  std::vector<int> pos(kernels);
  Wide bound = 0;  // proven lower bound on the optimal Σ cost
  if (fastest_extra <= slack) {
    for (int k = 0; k < kernels; ++k) pos[k] = int(cand[k].size()) - 1;
    sol.optimal = true;
  } else {
    const Reduction red = reduce_mckp(bytes, {});
    pos = red.incumbent;
    // The core, in bytes: its kernels' kept positions, weights over the smallest kept one.
    std::vector<int> core;
    Mckp exact;
    exact.capacity = slack;
    std::int64_t max_weight = 0;
    for (int k = 0; k < kernels; ++k) {
      const std::int64_t w0 = bytes.weight[k][red.keep[k][0]];
      exact.capacity -= w0;
      if (red.keep[k].size() < 2) continue;
      core.push_back(k);
      exact.cost.emplace_back();
      exact.weight.emplace_back();
      for (int p : red.keep[k]) {
        exact.cost.back().push_back(bytes.cost[k][p]);
        exact.weight.back().push_back(bytes.weight[k][p] - w0);
        max_weight = std::max(max_weight, exact.weight.back().back());
      }
    }
    UCPLAN_CHECK(exact.capacity >= 0, "MCKP reduction left no room for the core");
    Wide fixed_cost = 0;
    for (int k = 0; k < kernels; ++k)
      if (red.keep[k].size() < 2) fixed_cost += bytes.cost[k][red.keep[k][0]];
    // Core choice (index into keep) <-> full choice.
    std::vector<int> core_start;
    for (int k : core)
      core_start.push_back(int(std::find(red.keep[k].begin(), red.keep[k].end(), pos[k]) - red.keep[k].begin()));
    auto apply = [&](const std::vector<int>& c) {
      for (std::size_t i = 0; i < core.size(); ++i) pos[core[i]] = red.keep[core[i]][c[i]];
    };

    if (core.empty()) {
      sol.optimal = true;
      bound = cost_of(bytes, pos);
    } else {
      std::int64_t unit = 1;
      while (max_weight / unit > (std::int64_t(1) << 16)) unit *= 2;
      sol.workspace_unit = unit;
      Mckp up = exact, down = exact;
      up.capacity = down.capacity = exact.capacity / unit;
      for (std::size_t i = 0; i < core.size(); ++i)
        for (std::size_t p = 0; p < exact.weight[i].size(); ++p) {
          up.weight[i][p] = (exact.weight[i][p] + unit - 1) / unit;
          down.weight[i][p] = exact.weight[i][p] / unit;
        }
      // The relaxation first: its optimum is a lower bound, and its answer, when it fits in
      // bytes, is optimal. Only otherwise is the conservative problem solved. Anything feasible
      // in bytes is feasible for the relaxation, so the byte incumbent starts it.
      std::vector<int> best = core_start;  // the byte incumbent, unless beaten
      const MckpAnswer relax = solve_mckp(unit == 1 ? up : down, core_start);
      sol.ilp_solves += relax.used_ilp;
      const bool fits = weight_of(exact, relax.pos) <= exact.capacity;
      if (fits && cost_of(exact, relax.pos) < cost_of(exact, best)) best = relax.pos;
      if (!fits) {
        const MckpAnswer cons = solve_mckp(up, core_start);
        sol.ilp_solves += cons.used_ilp;
        if (cost_of(exact, cons.pos) < cost_of(exact, best)) best = cons.pos;
      }
      if (relax.optimal) {
        bound = fixed_cost + cost_of(exact, relax.pos);
        sol.optimal = cost_of(exact, best) == cost_of(exact, relax.pos);
      }
      // The rounding to `unit` can lose the best choice, one that fits only to the byte (0.2 % of
      // random instances; 8 of 82 totals on resnet18's measured H100 profile, up to 0.18 %
      // slower): Pareto sums in bytes find it, or prove there is none, unless they grow too many.
      if (!sol.optimal) {
        const ParetoAnswer exact_sums = solve_mckp_pareto(exact, cost_of(exact, best), kParetoSums);
        if (exact_sums.complete) {
          if (!exact_sums.pos.empty()) best = exact_sums.pos;
          sol.optimal = true;
          bound = fixed_cost + cost_of(exact, best);
        }
      }
      apply(best);
    }
  }

  Wide time = 0, ws = 0;
  for (int k = 0; k < kernels; ++k) {
    const int i = cand[k][pos[k]];
    sol.choice.push_back(i);
    time += fronts[k][i].time_ns;
    ws += fronts[k][i].workspace_bytes;
  }
  UCPLAN_CHECK(ws <= total_workspace, "WD choice exceeds the total workspace");
  UCPLAN_CHECK(time <= std::numeric_limits<std::int64_t>::max(), "WD time overflows");
  sol.time_ns = std::int64_t(time);
  sol.workspace_bytes = std::int64_t(ws);
  Wide fastest = 0;
  for (int k = 0; k < kernels; ++k) fastest += fronts[k][cand[k].back()].time_ns;
  sol.lower_bound_ns = sol.optimal ? sol.time_ns : std::int64_t(fastest + bound);
  return sol;
}

std::string find_config_error(const std::vector<MicroOption>& options, std::int64_t batch, const ConvConfig& config) {
  std::int64_t samples = 0, time = 0, ws = 0;
  for (std::size_t i = 0; i < config.micro.size(); ++i) {
    const MicroConfig& m = config.micro[i];
    const MicroOption* found = nullptr;
    for (const MicroOption& o : options)
      if (o.algo == m.algo && o.micro_batch == m.micro_batch) found = &o;
    if (!found)
      return "micro-configuration " + m.algo + " x" + std::to_string(m.micro_batch) + " is not in the options";
    if (i > 0) {
      const MicroConfig& p = config.micro[i - 1];
      if (p.micro_batch < m.micro_batch || (p.micro_batch == m.micro_batch && p.algo > m.algo))
        return "micro-configurations are not in canonical order at " + std::to_string(i);
    }
    samples += m.micro_batch;
    time += found->time_ns;
    ws = std::max(ws, found->workspace_bytes);
  }
  if (samples != batch)
    return "micro-batches cover " + std::to_string(samples) + " samples, not " + std::to_string(batch);
  if (time != config.time_ns)
    return "time " + std::to_string(config.time_ns) + " ns, the options sum to " + std::to_string(time);
  if (ws != config.workspace_bytes)
    return "workspace " + std::to_string(config.workspace_bytes) + " B, the options' max is " + std::to_string(ws);
  return "";
}

}  // namespace ucplan
