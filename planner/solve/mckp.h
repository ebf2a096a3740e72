// The multiple-choice knapsack behind mu-cuDNN's WD (§III-C, Eqs. 1-4): per kernel one
// configuration, total workspace within the capacity, least total time. Generic: kernels are
// rows of (cost, weight) candidates; conv_config.cpp builds them from the Pareto fronts. The
// exact answer is an LP-based reduction (Sinha & Zoltners) that fixes most kernels, then CBC
// (ilp.h) on what is left.
#pragma once

#include <cstdint>
#include <vector>

namespace ucplan {

__extension__ typedef __int128 Wide;  // sums of many 64-bit costs and weights

// A multiple-choice knapsack: per kernel, per candidate position, a cost (ns over the kernel's
// fastest) and a weight (workspace over its smallest, in some unit); weights ascend with the
// position and position 0 has the smallest.
struct Mckp {
  std::vector<std::vector<std::int64_t>> cost, weight;
  std::int64_t capacity = 0;
};

Wide cost_of(const Mckp& m, const std::vector<int>& pos);
Wide weight_of(const Mckp& m, const std::vector<int>& pos);

// The part of an MCKP that still needs deciding.
struct Reduction {
  std::vector<int> incumbent;          // a feasible choice
  std::vector<std::vector<int>> keep;  // per kernel, the positions that may beat it
};

// The LP relaxation's reduction of m from the feasible choice `start` (empty: none): an
// incumbent and, per kernel, the positions that may still beat it.
Reduction reduce_mckp(const Mckp& m, const std::vector<int>& start);

struct MckpAnswer {
  std::vector<int> pos;
  bool optimal = false;
  bool used_ilp = false;
};

// Exact solution: reduce_mckp decides most kernels, CBC the rest. `optimal` is CBC's proof (or
// true when nothing was left to decide).
MckpAnswer solve_mckp(const Mckp& m, const std::vector<int>& start);

// Exact in the weights' own units, by Pareto sums (Nemhauser & Ullmann 1969): kernel by kernel,
// the (cost, weight) sums that no other sum beats in both, kept while within the capacity and
// while they can still cost less than `beat` (with the least cost of the kernels after them).
// `complete` when no kernel's set of sums grew past `max_points`: then `pos` is a choice of least
// cost if one costs less than `beat`, else empty (nothing does). Where solve_mckp had to round
// large weights to a coarser unit for CBC, this says whether the rounding lost anything.
struct ParetoAnswer {
  bool complete = false;
  std::vector<int> pos;
};
ParetoAnswer solve_mckp_pareto(const Mckp& m, Wide beat, std::size_t max_points);

}  // namespace ucplan
