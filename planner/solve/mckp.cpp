#include "mckp.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "ilp.h"
#include "planner/model/errors.h"

namespace ucplan {

namespace {

// Local search on a feasible choice, best improving move first: one kernel moves (to any
// position that fits), or two kernels move, one down to free workspace and one up to use it.
// For the pairs, moves that free workspace are sorted by the amount freed with the two cheapest
// (of different kernels) kept for every suffix, so a pass costs O(n log n), not O(n^2).
void improve_choice(const Mckp& m, std::vector<int>& pos) {
  const int kernels = int(m.cost.size());
  struct Move {
    int kernel, to;
    std::int64_t dw, dc;  // change of weight and of cost
  };
  for (int pass = 0; pass < 64; ++pass) {
    const std::int64_t room = m.capacity - std::int64_t(weight_of(m, pos));
    std::vector<Move> up, down;
    Move best{-1, -1, 0, 0}, best_pair{-1, -1, 0, 0};
    for (int k = 0; k < kernels; ++k)
      for (int p = 0; p < int(m.cost[k].size()); ++p) {
        const Move mv{k, p, m.weight[k][p] - m.weight[k][pos[k]], m.cost[k][p] - m.cost[k][pos[k]]};
        if (mv.dw <= room && mv.dc < best.dc) best = mv;
        if (mv.dw > 0 && mv.dc < 0) up.push_back(mv);
        if (mv.dw < 0) down.push_back(mv);
      }
    std::sort(down.begin(), down.end(), [](const Move& a, const Move& b) {
      return a.dw != b.dw ? a.dw < b.dw : (a.kernel != b.kernel ? a.kernel < b.kernel : a.to < b.to);
    });
    // cheapest[i]: the two cheapest moves among down[0..i] (most freed first), distinct kernels.
    std::vector<std::pair<int, int>> cheapest(down.size(), {-1, -1});
    for (int i = 0; i < int(down.size()); ++i) {
      std::pair<int, int> c = i ? cheapest[i - 1] : std::pair<int, int>{-1, -1};
      auto better = [&](int a, int b) { return b < 0 || down[a].dc < down[b].dc; };
      if (better(i, c.first)) {
        if (c.first >= 0 && down[c.first].kernel != down[i].kernel) c.second = c.first;
        c.first = i;
      } else if (down[i].kernel != down[c.first].kernel && better(i, c.second)) {
        c.second = i;
      }
      cheapest[i] = c;
    }
    std::int64_t best_pair_dc = 0;
    int pair_down = -1;
    for (const Move& u : up) {
      // Free at least u.dw - room: down moves with dw <= room - u.dw, a prefix of `down`.
      const std::int64_t limit = room - u.dw;
      const int n = int(
          std::upper_bound(down.begin(), down.end(), limit, [](std::int64_t v, const Move& d) { return v < d.dw; }) -
          down.begin());
      if (n == 0) continue;
      const auto [a, b] = cheapest[n - 1];
      const int d = down[a].kernel != u.kernel ? a : b;
      if (d < 0 || down[d].kernel == u.kernel) continue;
      if (u.dc + down[d].dc < best_pair_dc) {
        best_pair_dc = u.dc + down[d].dc;
        best_pair = u;
        pair_down = d;
      }
    }
    if (best_pair_dc < best.dc) {
      pos[best_pair.kernel] = best_pair.to;
      pos[down[pair_down].kernel] = down[pair_down].to;
    } else if (best.kernel >= 0) {
      pos[best.kernel] = best.to;
    } else {
      break;
    }
  }
}

}  // namespace

Wide cost_of(const Mckp& m, const std::vector<int>& pos) {
  Wide z = 0;
  for (std::size_t k = 0; k < pos.size(); ++k) z += m.cost[k][pos[k]];
  return z;
}
Wide weight_of(const Mckp& m, const std::vector<int>& pos) {
  Wide w = 0;
  for (std::size_t k = 0; k < pos.size(); ++k) w += m.weight[k][pos[k]];
  return w;
}

// LP relaxation (Sinha & Zoltners): along each kernel's lower convex hull, upgrades taken in
// order of cost saved per unit of weight until the capacity runs out; the first upgrade that
// does not fit is the critical one, and its ratio dc/dw is the knapsack row's dual price λ.
// Incumbent: the same upgrades, skipping those that do not fit (or `start`, if feasible and
// cheaper), then improve_choice. Reduction: for any λ >= 0 the
// Lagrangian bound
//   L(λ) = Σ_k min_p (c_kp + λ w_kp) - λ C
// holds for every feasible choice, and choosing p for kernel k costs at least L(λ) + rc_kp with
// rc_kp = (c_kp + λ w_kp) - min_p' (c_kp' + λ w_kp'). A position with L(λ) + rc_kp > incumbent
// cannot be part of any choice at least as good as the incumbent, so it is dropped; the
// incumbent's own positions always stay. Exact integer arithmetic throughout (scaled by dw).
Reduction reduce_mckp(const Mckp& m, const std::vector<int>& start) {
  const int kernels = int(m.cost.size());
  struct Step {
    int kernel, from, to;
    std::int64_t dw, dc;
  };
  std::vector<Step> steps;
  for (int k = 0; k < kernels; ++k) {
    const std::vector<std::int64_t>& w = m.weight[k];
    const std::vector<std::int64_t>& c = m.cost[k];
    std::vector<int> hull;  // lower convex hull, weight strictly ascending
    for (int p = 0; p < int(c.size()); ++p) {
      if (w[p] > m.capacity) continue;
      while (!hull.empty() && w[hull.back()] >= w[p] && c[hull.back()] >= c[p]) hull.pop_back();
      while (hull.size() >= 2) {
        const int a = hull[hull.size() - 2], b = hull.back();
        // b on or above the segment a-p: not on the hull.
        if (Wide(c[a] - c[b]) * (w[p] - w[a]) <= Wide(c[a] - c[p]) * (w[b] - w[a]))
          hull.pop_back();
        else
          break;
      }
      if (hull.empty() || w[p] > w[hull.back()]) hull.push_back(p);
    }
    for (std::size_t h = 1; h < hull.size(); ++h)
      steps.push_back({k, hull[h - 1], hull[h], w[hull[h]] - w[hull[h - 1]], c[hull[h - 1]] - c[hull[h]]});
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Step& a, const Step& b) { return Wide(a.dc) * b.dw > Wide(b.dc) * a.dw; });

  // Greedy incumbent and the dual price λ = lam_dc / lam_dw.
  Reduction r;
  std::vector<int>& pos = r.incumbent;
  pos.assign(kernels, 0);
  UCPLAN_CHECK(weight_of(m, pos) <= m.capacity, "MCKP without a feasible choice");
  std::int64_t room = m.capacity - std::int64_t(weight_of(m, pos)), lam_dc = 0, lam_dw = 1;
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
  if (!start.empty() && weight_of(m, start) <= m.capacity && cost_of(m, start) < cost_of(m, pos)) pos = start;
  improve_choice(m, pos);
  const Wide incumbent = cost_of(m, pos);

  // Reduction, everything multiplied by lam_dw > 0.
  auto priced = [&](int k, int p) { return Wide(m.cost[k][p]) * lam_dw + Wide(lam_dc) * m.weight[k][p]; };
  std::vector<Wide> base(kernels);
  Wide lagrangian = -Wide(lam_dc) * m.capacity;
  for (int k = 0; k < kernels; ++k) {
    base[k] = priced(k, 0);
    for (int p = 1; p < int(m.cost[k].size()); ++p)
      if (m.weight[k][p] <= m.capacity) base[k] = std::min(base[k], priced(k, p));
    lagrangian += base[k];
  }
  r.keep.resize(kernels);
  for (int k = 0; k < kernels; ++k) {
    for (int p = 0; p < int(m.cost[k].size()); ++p)
      if (m.weight[k][p] <= m.capacity && lagrangian + priced(k, p) - base[k] <= incumbent * lam_dw)
        r.keep[k].push_back(p);
    UCPLAN_CHECK(std::find(r.keep[k].begin(), r.keep[k].end(), pos[k]) != r.keep[k].end(),
                 "MCKP reduction dropped the incumbent");
  }
  return r;
}

// Exact solution of an MCKP: reduce_mckp decides most kernels, CBC the rest (Eqs. (1)-(4) over
// the kept configurations of the free kernels, capacity less what the fixed kernels take),
// starting from the incumbent. `optimal` is CBC's proof (or true when nothing was left).
MckpAnswer solve_mckp(const Mckp& m, const std::vector<int>& start) {
  const int kernels = int(m.cost.size());
  const Reduction red = reduce_mckp(m, start);
  std::vector<int> pos = red.incumbent;
  std::int64_t free_capacity = m.capacity;
  for (int k = 0; k < kernels; ++k)
    if (red.keep[k].size() == 1) free_capacity -= m.weight[k][red.keep[k][0]];

  // Identical kernels (layers of one shape share one measurement, e.g. ResNet-152's 36 stage-3
  // blocks) would make a 0-1 model symmetric: any permutation of their choices is as good, and
  // branch-and-bound visits them all (a synthetic ResNet-152 did not finish in 5 minutes;
  // symmetry-breaking rows brought it to ~0.1-1 s, this form to ~10 ms). So free kernels
  // with the same kept configurations form a class, and the ILP counts, per class and kept
  // position q_j (j >= 1), how many members take q_j or a larger one:
  //   y_j in {0..n},  y_1 >= y_2 >= ... >= y_{P-1}   (incremental form of Eqs. (1)-(4))
  //   time  = Σ_classes n c_{q_0} + Σ_j y_j (c_{q_j} - c_{q_{j-1}})     (minimised)
  //   space = Σ_classes n w_{q_0} + Σ_j y_j (w_{q_j} - w_{q_{j-1}})  <= capacity
  // With n = 1 this is the 0-1 model; its LP relaxation is the multiple-choice one (the map
  // x_j = y_j - y_{j+1} is unimodular), and branching on y_j splits by workspace. Members take
  // positions in kernel order, largest first.
  std::vector<std::vector<int>> classes;
  std::map<std::vector<std::int64_t>, int> class_of;
  for (int k = 0; k < kernels; ++k) {
    if (red.keep[k].size() < 2) continue;
    std::vector<std::int64_t> sig;
    for (int p : red.keep[k]) {
      sig.push_back(p);
      sig.push_back(m.cost[k][p]);
      sig.push_back(m.weight[k][p]);
    }
    auto [it, fresh] = class_of.try_emplace(std::move(sig), int(classes.size()));
    if (fresh) classes.emplace_back();
    classes[it->second].push_back(k);
  }

  MckpAnswer a;
  a.pos = pos;
  if (classes.empty()) {  // every kernel down to its incumbent position
    a.optimal = true;
    return a;
  }
  Ilp ilp;
  IlpRow knapsack;
  knapsack.sense = IlpSense::le;
  knapsack.rhs = free_capacity;
  std::vector<int> first_var;
  for (const std::vector<int>& cls : classes) {
    const std::vector<int>& q = red.keep[cls[0]];
    const std::int64_t n = std::int64_t(cls.size());
    knapsack.rhs -= n * m.weight[cls[0]][q[0]];
    first_var.push_back(int(ilp.objective.size()));
    for (std::size_t j = 1; j < q.size(); ++j) {
      const int var = int(ilp.objective.size());
      std::int64_t at_least = 0;  // incumbent members at q_j or above
      for (int k : cls) at_least += pos[k] >= q[j];
      ilp.objective.push_back(m.cost[cls[0]][q[j]] - m.cost[cls[0]][q[j - 1]]);
      ilp.upper.push_back(n);
      ilp.start.push_back(at_least);
      knapsack.terms.push_back({var, m.weight[cls[0]][q[j]] - m.weight[cls[0]][q[j - 1]]});
      if (j > 1) ilp.rows.push_back({{{var, 1}, {var - 1, -1}}, IlpSense::le, 0});
    }
  }
  ilp.rows.push_back(std::move(knapsack));
  const IlpResult r = solve_ilp(ilp);
  a.used_ilp = true;
  // The incumbent is feasible, so the solver always returns a feasible x.
  UCPLAN_CHECK(r.status == IlpStatus::optimal || r.status == IlpStatus::feasible,
               "WD ILP returned no solution although its start is feasible");
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const std::vector<int>& q = red.keep[classes[c][0]];
    for (std::size_t i = 0; i < classes[c].size(); ++i) {
      std::size_t j = 0;  // member i takes the largest q_j with more than i members at or above
      while (j + 1 < q.size() && r.x[first_var[c] + j] > std::int64_t(i)) ++j;
      a.pos[classes[c][i]] = q[j];
    }
  }
  UCPLAN_CHECK(weight_of(m, a.pos) <= m.capacity, "WD ILP answer exceeds the capacity");
  a.optimal = r.status == IlpStatus::optimal;
  return a;
}

ParetoAnswer solve_mckp_pareto(const Mckp& m, Wide beat, std::size_t max_points) {
  const int kernels = int(m.cost.size());
  // After kernel k: the least cost and the least weight the kernels after it add.
  std::vector<Wide> cost_after(kernels + 1, 0), weight_after(kernels + 1, 0);
  for (int k = kernels - 1; k >= 0; --k) {
    cost_after[k] = cost_after[k + 1] + *std::min_element(m.cost[k].begin(), m.cost[k].end());
    weight_after[k] = weight_after[k + 1] + *std::min_element(m.weight[k].begin(), m.weight[k].end());
  }
  struct Sum {
    Wide cost;
    Wide weight;
    int parent;  // in the previous kernel's sums
    int position;
  };
  std::vector<std::vector<Sum>> sums(kernels + 1);
  sums[0].push_back({0, 0, -1, -1});
  ParetoAnswer a;
  for (int k = 0; k < kernels; ++k) {
    std::vector<Sum> next;
    for (int s = 0; s < int(sums[k].size()); ++s)
      for (int p = 0; p < int(m.cost[k].size()); ++p) {
        const Sum x{sums[k][s].cost + m.cost[k][p], sums[k][s].weight + m.weight[k][p], s, p};
        if (x.weight + weight_after[k + 1] <= m.capacity && x.cost + cost_after[k + 1] < beat) next.push_back(x);
      }
    // By weight, then cost, then the earlier choice: the first of each cost-decreasing run stays.
    std::sort(next.begin(), next.end(), [](const Sum& x, const Sum& y) {
      if (x.weight != y.weight) return x.weight < y.weight;
      if (x.cost != y.cost) return x.cost < y.cost;
      return x.parent != y.parent ? x.parent < y.parent : x.position < y.position;
    });
    for (const Sum& x : next)
      if (sums[k + 1].empty() || x.cost < sums[k + 1].back().cost) sums[k + 1].push_back(x);
    if (sums[k + 1].size() > max_points) return a;
  }
  a.complete = true;
  if (sums[kernels].empty()) return a;
  // The least cost is the last sum (costs fall as weights rise); ties went to the lighter one.
  a.pos.assign(kernels, -1);
  int at = int(sums[kernels].size()) - 1;
  for (int k = kernels; k > 0; --k) {
    a.pos[k - 1] = sums[k][at].position;
    at = sums[k][at].parent;
  }
  return a;
}

}  // namespace ucplan
