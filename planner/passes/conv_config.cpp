#include "conv_config.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include "ilp.h"
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
                 "micro option listed twice: " + sorted[i]->algo + " x" +
                     std::to_string(sorted[i]->micro_batch));
}

// The options usable for `batch` within `ws_limit`, in canonical order, without those that can
// never be part of a front configuration: within one micro-batch size an option is dropped when
// another one has a smaller-or-equal key (time, then rank) and no more workspace (replacing it
// gives a configuration at least as good in every respect). With `keep_one`, only the smallest
// key of each size is kept (enough when workspace is not an objective, as in WR).
std::vector<MicroOption> usable_options(const std::vector<MicroOption>& options,
                                        std::int64_t batch, std::int64_t ws_limit,
                                        bool keep_one) {
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
      if (!keep.empty() && (keep_one || v[i].workspace_bytes >= v[keep.back()].workspace_bytes))
        continue;
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
  std::int32_t ws = -1;     // rank of the workspace among the distinct option workspaces; -1: none
  std::int32_t head = -1;   // option rank; -1: the empty configuration
  std::int32_t rest = -1;   // index in the front for b - micro_batch(head)
};

struct Chains {
  const std::vector<MicroOption>* opt = nullptr;
  std::vector<std::vector<Node>> at;   // at[b]: the nodes kept for b samples
};

// Lexicographic comparison of two canonical lists of equal length: -1, 0 or 1. The lists are
// the chains starting at at[b1][i1] and at[b2][i2].
int compare_lists(const Chains& c, std::int64_t b1, int i1, std::int64_t b2, int i2) {
  while (!(b1 == b2 && i1 == i2)) {   // a shared tail is equal
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

__extension__ typedef __int128 Wide;

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

// A multiple-choice knapsack: per kernel, per candidate position, a cost (ns over the kernel's
// fastest) and a weight (workspace over its smallest, in some unit); position 0 has weight 0.
struct Mckp {
  std::vector<std::vector<std::int64_t>> cost, weight;
  std::int64_t capacity = 0;
};

struct MckpAnswer {
  std::vector<int> pos;
  bool optimal = false;
  bool used_ilp = false;
};

// Exact solution of an MCKP: LP relaxation, incumbent and reduction here, the core with CBC.
//
// LP relaxation (Sinha & Zoltners): along each kernel's lower convex hull, upgrades taken in
// order of cost saved per unit of weight until the capacity runs out; the first upgrade that
// does not fit is the critical one, and its ratio dc/dw is the knapsack row's dual price λ.
// Incumbent: the same upgrades, skipping those that do not fit, then single-kernel swaps while
// they help. Reduction: for any λ >= 0 the Lagrangian bound
//   L(λ) = Σ_k min_p (c_kp + λ w_kp) - λ C
// holds for every feasible choice, and choosing p for kernel k costs at least L(λ) + rc_kp with
// rc_kp = (c_kp + λ w_kp) - min_p' (c_kp' + λ w_kp'). A position with L(λ) + rc_kp > incumbent
// cannot be part of any choice at least as good as the incumbent, so it is dropped (the
// incumbent's own positions always stay). CBC then proves optimality on what is left, which
// for these problems is a small core. All of it in exact integer arithmetic (scaled by dw).
MckpAnswer solve_mckp(const Mckp& m, const std::vector<int>& start) {
  const int kernels = int(m.cost.size());
  struct Step {
    int kernel, from, to;
    std::int64_t dw, dc;
  };
  std::vector<Step> steps;
  for (int k = 0; k < kernels; ++k) {
    const std::vector<std::int64_t>& w = m.weight[k];
    const std::vector<std::int64_t>& c = m.cost[k];
    std::vector<int> hull;   // lower convex hull, weight strictly ascending
    for (int p = 0; p < int(c.size()); ++p) {
      if (w[p] > m.capacity) continue;
      while (!hull.empty() && w[hull.back()] >= w[p] && c[hull.back()] >= c[p]) hull.pop_back();
      while (hull.size() >= 2) {
        const int a = hull[hull.size() - 2], b = hull.back();
        // b on or above the segment a-p: not on the hull.
        if (Wide(c[a] - c[b]) * (w[p] - w[a]) <= Wide(c[a] - c[p]) * (w[b] - w[a])) hull.pop_back();
        else break;
      }
      if (hull.empty() || w[p] > w[hull.back()]) hull.push_back(p);
    }
    for (std::size_t h = 1; h < hull.size(); ++h)
      steps.push_back({k, hull[h - 1], hull[h], m.weight[k][hull[h]] - m.weight[k][hull[h - 1]],
                       m.cost[k][hull[h - 1]] - m.cost[k][hull[h]]});
  }
  std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    return Wide(a.dc) * b.dw > Wide(b.dc) * a.dw;
  });

  // Greedy incumbent and the dual price λ = lam_dc / lam_dw.
  std::vector<int> pos(kernels, 0);
  std::int64_t room = m.capacity, lam_dc = 0, lam_dw = 1;
  bool critical_found = false;
  for (const Step& s : steps) {
    if (pos[s.kernel] != s.from) continue;
    if (s.dw <= room) {
      pos[s.kernel] = s.to;
      room -= s.dw;
    } else if (!critical_found) {
      critical_found = true;
      lam_dc = s.dc;
      lam_dw = s.dw;
    }
  }
  auto cost_of = [&](const std::vector<int>& x) {
    Wide z = 0;
    for (int k = 0; k < kernels; ++k) z += m.cost[k][x[k]];
    return z;
  };
  auto weight_of = [&](const std::vector<int>& x) {
    Wide w = 0;
    for (int k = 0; k < kernels; ++k) w += m.weight[k][x[k]];
    return w;
  };
  if (!start.empty() && weight_of(start) <= m.capacity && cost_of(start) < cost_of(pos)) {
    pos = start;
    room = m.capacity - std::int64_t(weight_of(pos));
  }
  // Single-kernel swaps: the best improving one each pass (deterministic), a few passes.
  for (int pass = 0; pass < 8; ++pass) {
    int best_k = -1, best_p = -1;
    std::int64_t best_gain = 0;
    for (int k = 0; k < kernels; ++k)
      for (int p = 0; p < int(m.cost[k].size()); ++p) {
        const std::int64_t dw = m.weight[k][p] - m.weight[k][pos[k]];
        const std::int64_t gain = m.cost[k][pos[k]] - m.cost[k][p];
        if (dw <= room && gain > best_gain) {
          best_gain = gain;
          best_k = k;
          best_p = p;
        }
      }
    if (best_k < 0) break;
    room -= m.weight[best_k][best_p] - m.weight[best_k][pos[best_k]];
    pos[best_k] = best_p;
  }
  const Wide incumbent = cost_of(pos);

  // Reduction, everything multiplied by lam_dw > 0.
  std::vector<Wide> base(kernels);
  Wide lagrangian = -Wide(lam_dc) * m.capacity;
  auto priced = [&](int k, int p) { return Wide(m.cost[k][p]) * lam_dw + Wide(lam_dc) * m.weight[k][p]; };
  for (int k = 0; k < kernels; ++k) {
    base[k] = priced(k, 0);
    for (int p = 1; p < int(m.cost[k].size()); ++p)
      if (m.weight[k][p] <= m.capacity) base[k] = std::min(base[k], priced(k, p));
    lagrangian += base[k];
  }
  std::vector<std::vector<int>> keep(kernels);
  std::int64_t free_capacity = m.capacity;
  for (int k = 0; k < kernels; ++k) {
    for (int p = 0; p < int(m.cost[k].size()); ++p)
      if (m.weight[k][p] <= m.capacity &&
          lagrangian + priced(k, p) - base[k] <= incumbent * lam_dw)
        keep[k].push_back(p);
    UCPLAN_CHECK(std::find(keep[k].begin(), keep[k].end(), pos[k]) != keep[k].end(),
                 "MCKP reduction dropped the incumbent");
    if (keep[k].size() == 1) free_capacity -= m.weight[k][keep[k][0]];
  }

  // Identical kernels (layers of one shape share one measurement) make the ILP symmetric: any
  // permutation of their choices is as good, and branch-and-bound would visit them all. Within a
  // class of identical free kernels, only choices with positions non-increasing in kernel order
  // are allowed (rows below); the incumbent is sorted the same way, which changes neither its
  // cost nor its weight.
  std::vector<std::vector<int>> classes;
  {
    std::map<std::vector<std::int64_t>, int> class_of;
    for (int k = 0; k < kernels; ++k) {
      if (keep[k].size() < 2) continue;
      std::vector<std::int64_t> sig;
      for (int p : keep[k]) {
        sig.push_back(m.cost[k][p]);
        sig.push_back(m.weight[k][p]);
      }
      auto [it, fresh] = class_of.try_emplace(std::move(sig), int(classes.size()));
      if (fresh) classes.emplace_back();
      classes[it->second].push_back(k);
    }
    for (const std::vector<int>& cls : classes) {
      std::vector<int> p;
      for (int k : cls) p.push_back(pos[k]);
      std::sort(p.rbegin(), p.rend());
      for (std::size_t i = 0; i < cls.size(); ++i) pos[cls[i]] = p[i];
    }
  }

  MckpAnswer a;
  a.pos = pos;
  Ilp01 ilp;
  IlpRow knapsack;
  knapsack.sense = IlpSense::le;
  knapsack.rhs = free_capacity;
  std::vector<std::vector<std::pair<int, int>>> vars(kernels);   // (position, variable)
  for (int k = 0; k < kernels; ++k) {
    if (keep[k].size() < 2) continue;
    IlpRow one;
    one.sense = IlpSense::eq;
    one.rhs = 1;
    for (int p : keep[k]) {
      const int var = int(ilp.objective.size());
      vars[k].push_back({p, var});
      ilp.objective.push_back(m.cost[k][p]);
      ilp.start.push_back(pos[k] == p ? 1 : 0);
      if (m.weight[k][p] > 0) knapsack.terms.push_back({var, m.weight[k][p]});
      one.terms.push_back({var, 1});
    }
    ilp.rows.push_back(std::move(one));
  }
  if (ilp.objective.empty()) {   // every kernel down to its incumbent position
    a.optimal = true;
    return a;
  }
  ilp.rows.push_back(std::move(knapsack));
  for (const std::vector<int>& cls : classes)
    for (std::size_t i = 1; i < cls.size(); ++i) {
      IlpRow order;   // position(cls[i]) - position(cls[i-1]) <= 0
      order.sense = IlpSense::le;
      order.rhs = 0;
      for (const auto& [p, var] : vars[cls[i]])
        if (p > 0) order.terms.push_back({var, p});
      for (const auto& [p, var] : vars[cls[i - 1]])
        if (p > 0) order.terms.push_back({var, -p});
      ilp.rows.push_back(std::move(order));
    }
  const Ilp01Result r = solve_ilp01(ilp);
  a.used_ilp = true;
  // The incumbent is feasible, so the solver always returns a feasible x.
  UCPLAN_CHECK(r.status == IlpStatus::optimal || r.status == IlpStatus::feasible,
               "WD ILP returned no solution although its start is feasible");
  for (int k = 0; k < kernels; ++k) {
    if (vars[k].empty()) continue;
    int chosen = -1;
    for (const auto& [p, var] : vars[k])
      if (r.x[var]) {
        UCPLAN_CHECK(chosen < 0, "WD ILP chose two configurations for one kernel");
        chosen = p;
      }
    UCPLAN_CHECK(chosen >= 0, "WD ILP chose no configuration for a kernel");
    a.pos[k] = chosen;
  }
  UCPLAN_CHECK(weight_of(a.pos) <= m.capacity, "WD ILP answer exceeds the capacity");
  a.optimal = r.status == IlpStatus::optimal;
  return a;
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
  const std::vector<MicroOption> opt =
      usable_options(options, batch, std::numeric_limits<std::int64_t>::max(), false);

  // Workspaces as ranks, so a configuration's workspace is an index into `best` below.
  std::vector<std::int64_t> ws_values;
  for (const MicroOption& o : opt) ws_values.push_back(o.workspace_bytes);
  std::sort(ws_values.begin(), ws_values.end());
  ws_values.erase(std::unique(ws_values.begin(), ws_values.end()), ws_values.end());
  std::vector<std::int32_t> ws_rank(opt.size());
  for (std::size_t o = 0; o < opt.size(); ++o)
    ws_rank[o] = std::int32_t(
        std::lower_bound(ws_values.begin(), ws_values.end(), opt[o].workspace_bytes) -
        ws_values.begin());

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
        if (n.head >= 0 && n.head < o) continue;   // not canonical: generated from its head
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

std::optional<ConvConfig> fastest_within(const std::vector<ConvConfig>& front,
                                         std::int64_t workspace_limit) {
  const ConvConfig* best = nullptr;
  for (const ConvConfig& c : front) {
    if (c.workspace_bytes > workspace_limit) continue;
    if (!best || c.time_ns < best->time_ns ||
        (c.time_ns == best->time_ns && c.workspace_bytes < best->workspace_bytes))
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
// Before CBC: each kernel's list is Pareto-filtered, its smallest workspace is taken off both
// its coefficients and the total (the row then measures only the extra workspace bought), and
// configurations that cannot fit even alone are dropped. If every kernel's fastest configuration
// fits, that is the answer and no ILP is needed.
//
// Bytes are too fine for CBC (ilp.h): the knapsack is solved in a power-of-two unit u with every
// extra workspace at most 2^16 u. Rounding weights up (and the capacity down) gives a
// conservative problem whose answer always fits in bytes; rounding weights down gives a
// relaxation whose optimum bounds the byte-exact optimum from below. The relaxation's answer is
// returned when it fits in bytes and is faster; the answer is proven optimal when its time
// equals the relaxation's, and otherwise the relaxation's time is reported as the bound (the
// conservative problem loses at most u bytes per kernel of the total). With u = 1 (all extra
// workspaces up to 64 KiB) the conservative problem is the exact one and is solved once.
std::optional<WdSolution> solve_wd(const std::vector<std::vector<ConvConfig>>& fronts,
                                   std::int64_t total_workspace) {
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

  // Extra workspace and time over each kernel's cheapest and fastest usable configuration.
  Mckp bytes;
  Wide fastest_extra = 0;
  std::int64_t max_extra = 0;
  for (int k = 0; k < kernels; ++k) {
    const std::int64_t w0 = fronts[k][cand[k][0]].workspace_bytes;
    while (fronts[k][cand[k].back()].workspace_bytes - w0 > slack) cand[k].pop_back();
    const std::int64_t t_fast = fronts[k][cand[k].back()].time_ns;
    bytes.cost.emplace_back();
    bytes.weight.emplace_back();
    for (int i : cand[k]) {
      bytes.cost[k].push_back(fronts[k][i].time_ns - t_fast);
      bytes.weight[k].push_back(fronts[k][i].workspace_bytes - w0);
      max_extra = std::max(max_extra, bytes.weight[k].back());
    }
    fastest_extra += bytes.weight[k].back();
  }
  bytes.capacity = slack;
  auto time_of = [&](const std::vector<int>& pos) {
    Wide t = 0;
    for (int k = 0; k < kernels; ++k) t += bytes.cost[k][pos[k]];
    return t;
  };
  auto extra_of = [&](const std::vector<int>& pos) {
    Wide w = 0;
    for (int k = 0; k < kernels; ++k) w += bytes.weight[k][pos[k]];
    return w;
  };

  WdSolution sol;
  std::vector<int> pos(kernels);
  Wide bound = 0;   // proven lower bound on the optimal Σ cost
  if (fastest_extra <= slack) {
    for (int k = 0; k < kernels; ++k) pos[k] = int(cand[k].size()) - 1;
    sol.optimal = true;
  } else {
    std::int64_t unit = 1;
    while (max_extra / unit > (std::int64_t(1) << 16)) unit *= 2;
    sol.workspace_unit = unit;
    Mckp up = bytes, down = bytes;
    up.capacity = down.capacity = slack / unit;
    for (int k = 0; k < kernels; ++k)
      for (std::size_t p = 0; p < bytes.weight[k].size(); ++p) {
        up.weight[k][p] = (bytes.weight[k][p] + unit - 1) / unit;
        down.weight[k][p] = bytes.weight[k][p] / unit;
      }
    const MckpAnswer cons = solve_mckp(up, {});
    sol.ilp_solves += cons.used_ilp;
    pos = cons.pos;
    if (unit == 1) {
      sol.optimal = cons.optimal;
      if (cons.optimal) bound = time_of(pos);
    } else {
      // The conservative answer fits the relaxation too: a good first incumbent.
      const MckpAnswer relax = solve_mckp(down, cons.pos);
      sol.ilp_solves += relax.used_ilp;
      if (extra_of(relax.pos) <= slack && time_of(relax.pos) < time_of(pos)) pos = relax.pos;
      if (relax.optimal) {
        bound = time_of(relax.pos);
        sol.optimal = time_of(pos) == bound;
      }
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

std::string find_config_error(const std::vector<MicroOption>& options, std::int64_t batch,
                              const ConvConfig& config) {
  std::int64_t samples = 0, time = 0, ws = 0;
  for (std::size_t i = 0; i < config.micro.size(); ++i) {
    const MicroConfig& m = config.micro[i];
    const MicroOption* found = nullptr;
    for (const MicroOption& o : options)
      if (o.algo == m.algo && o.micro_batch == m.micro_batch) found = &o;
    if (!found)
      return "micro-configuration " + m.algo + " x" + std::to_string(m.micro_batch) +
             " is not in the options";
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
    return "micro-batches cover " + std::to_string(samples) + " samples, not " +
           std::to_string(batch);
  if (time != config.time_ns)
    return "time " + std::to_string(config.time_ns) + " ns, the options sum to " +
           std::to_string(time);
  if (ws != config.workspace_bytes)
    return "workspace " + std::to_string(config.workspace_bytes) + " B, the options' max is " +
           std::to_string(ws);
  return "";
}

}  // namespace ucplan
