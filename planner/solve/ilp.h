// An integer linear programme over bounded non-negative integers (0-1 unless an upper bound
// says otherwise) as plain data, and its solver (STYLE #7: the solver at arm's length). Data are
// integers, so a solution is checked exactly; ilp_cbc.cpp is the only file that includes CBC
// headers: it scales each row and the objective by a power of two (exact in floating point)
// before handing them to CBC, and re-checks the rounded answer in integers.
//
//   minimise  Σ_j objective[j] x_j   subject to   Σ_j a_rj x_j  (<= | = | >=)  rhs_r,
//             x_j ∈ {0, 1, ..., upper[j]}   (upper[j] = 1 when `upper` is empty)
//
// WD (mu-cuDNN §III-C, Eqs. 1-4) is the 0-1 case; bounds above 1 let identical kernels be
// aggregated into one count per configuration instead of symmetric 0-1 copies.
//
// CBC is a floating-point solver. Feasibility of the answer is always checked here exactly, but
// its optimality proof is reliable only while LP points cannot have tiny fractions, i.e. while
// each row's coefficients stay within about 2^16 of its smallest non-zero step: a row in raw
// bytes (1e10 coefficients, 1-byte slack) yields LP values like 1 - 1e-10, and CBC 2.10 then
// closes nodes it should branch on (seen: a wrong "proven optimal" and a wrong "infeasible" on
// 6-variable problems). Callers with byte-sized data round to coarser units, as solve_wd does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ucplan {

struct IlpTerm {
  int var = 0;
  std::int64_t coef = 0;
};

enum class IlpSense { le, eq, ge };

struct IlpRow {
  std::vector<IlpTerm> terms;  // each variable at most once per row
  IlpSense sense = IlpSense::le;
  std::int64_t rhs = 0;
};

struct Ilp {
  std::vector<std::int64_t> objective;  // one per variable; defines n
  std::vector<IlpRow> rows;
  std::vector<std::int64_t> upper;  // per variable, >= 0; empty: every variable is 0-1
  // Optional feasible solution (n values) handed to the solver as its first incumbent; ignored
  // if it is not feasible. Empty: none.
  std::vector<std::int64_t> start;
  // Branch-and-bound node limit (deterministic, unlike a time limit); <= 0: no limit.
  std::int64_t max_nodes = 0;
  // Wall-clock limit in seconds (not deterministic: the answer may depend on the machine's
  // speed unless the solve ends before it); <= 0: no limit.
  double max_seconds = 0;
  // CBC's default strategy as its command line runs it (cut generators, primal heuristics;
  // preprocessing off, see ilp_cbc.cpp) instead of plain branch and bound with two heuristics. For
  // large MILPs whose LP bound is weak (the rematerialisation MILP); plain is faster on small ones
  // (WD).
  bool full_strategy = false;
};

enum class IlpStatus {
  optimal,      // x is feasible and proven optimal
  feasible,     // x is feasible; optimality not proven (node limit reached)
  infeasible,   // proven that no x satisfies the rows
  no_solution,  // stopped (limit) or failed without a feasible x
};

struct IlpResult {
  IlpStatus status = IlpStatus::no_solution;
  std::vector<std::int64_t> x;  // n values when status is optimal or feasible
  std::int64_t objective = 0;   // exact Σ objective[j] x_j
  std::int64_t nodes = 0;       // branch-and-bound nodes
  // Proven lower bound on the optimum (the best LP bound of the open nodes, rounded down);
  // equals `objective` when optimal. With a time limit that stopped the LP relaxation of a
  // full-strategy solve, the Lagrangian bound of the dual prices reached by then (ilp_cbc.cpp).
  // Meaningless when infeasible or when no LP was solved.
  std::int64_t bound = 0;
  // Times a row's rhs had to be tightened and the model re-solved because CBC's answer, rounded
  // to integers, violated that row in exact arithmetic (a floating-point tolerance artefact). After
  // a tightening the answer is at most `feasible`, never claimed optimal.
  int tightenings = 0;
  // Times CBC's full strategy (Ilp::full_strategy) died or gave no answer, and plain branch and
  // bound solved instead.
  int full_strategy_failures = 0;
};

IlpResult solve_ilp(const Ilp& ilp);

// Several ILPs solved at once, each full-strategy one by CBC in a child process of its own (the
// others in this process, one after another): every child is forked from this thread before any
// answer is waited for, so they run side by side (one core each) while no other thread of this
// process runs. A fork while another thread allocates is safe with glibc's malloc (fork takes its
// arena locks), not with every allocator: under AddressSanitizer a child forked from one thread
// while the other allocated inherited one of its locks held and hung in CBC's first allocation.
// The same answers as solve_ilp on each, in the same order.
std::vector<IlpResult> solve_ilps(const std::vector<const Ilp*>& ilps);

// Exact check of x against the bounds and every row: "" when feasible, else what is violated.
std::string find_ilp_violation(const Ilp& ilp, const std::vector<std::int64_t>& x);

}  // namespace ucplan
