// The only file that includes CBC headers (STYLE #7). CbcModel over OsiClpSolverInterface,
// silent (log level 0 on both), single-threaded and without time limits, so the same model gives
// the same answer run after run (TOOLCHAIN.md: checked; separate CbcModels are thread-safe).
#include <CbcHeuristic.hpp>
#include <CbcHeuristicLocal.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <ClpPresolve.hpp>
#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include <poll.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "ilp.h"
#include "planner/model/errors.h"

namespace ucplan {

namespace {

__extension__ typedef __int128 Wide;  // exact row activities even for byte-sized coefficients

std::uint64_t magnitude(std::int64_t v) { return v < 0 ? std::uint64_t(0) - std::uint64_t(v) : std::uint64_t(v); }

// Power-of-two scale that brings the largest magnitude to at most 2^bits. Multiplying by a power
// of two is exact in floating point, so scaled integer data stay exact (up to 2^53): raw bytes
// (1e9+) would hurt Clp's absolute tolerances (TOOLCHAIN.md), a power of two keeps the data
// exact while bringing it near 1.
double power_of_two_scale(std::uint64_t largest, int bits) {
  const int width = std::bit_width(largest);
  return width > bits ? std::ldexp(1.0, bits - width) : 1.0;
}

Wide activity(const IlpRow& row, const std::vector<std::int64_t>& x) {
  Wide a = 0;
  for (const IlpTerm& t : row.terms) a += Wide(t.coef) * x[t.var];
  return a;
}

std::int64_t upper_of(const Ilp& ilp, std::size_t j) { return ilp.upper.empty() ? 1 : ilp.upper[j]; }

bool row_holds(IlpSense sense, Wide a, std::int64_t rhs) {
  switch (sense) {
    case IlpSense::le:
      return a <= rhs;
    case IlpSense::eq:
      return a == rhs;
    case IlpSense::ge:
      return a >= rhs;
  }
  return false;
}

std::int64_t exact_objective(const Ilp& ilp, const std::vector<std::int64_t>& x) {
  Wide z = 0;
  for (std::size_t j = 0; j < x.size(); ++j) z += Wide(ilp.objective[j]) * x[j];
  UCPLAN_CHECK(z >= INT64_MIN && z <= INT64_MAX, "ILP objective overflows 64 bits");
  return std::int64_t(z);
}

struct CbcAnswer {
  bool infeasible = false;
  bool proven_optimal = false;
  std::vector<std::int64_t> x;  // empty: no solution
  std::int64_t nodes = 0;
  double bound = -COIN_DBL_MAX;  // in the ILP's own (unscaled) objective units
};

// What the child process of run_cbc_isolated knows while CBC runs, for its deadline (below).
struct Progress {
  CbcModel* bab = nullptr;          // the model branch and bound runs on (CbcMain1 copies ours)
  double lp_bound = -COIN_DBL_MAX;  // the LP relaxation's optimum, then the root's best after cuts (scaled)
  double obj_scale = 1.0;
  const Ilp* ilp = nullptr;
  std::int64_t* x = nullptr;  // room for the answer, allocated before CBC starts
  int fd = -1;
};
Progress progress;

// Follows CBC from inside: after each round of cuts at the root, the LP just solved (the
// relaxation with valid cuts, or with columns fixed by reduced cost against the incumbent, which
// only excludes worse solutions) bounds the optimum; and which model branch and bound runs on.
class ProgressEvents : public CbcEventHandler {
 public:
  CbcAction event(CbcEvent which) override {
    // Heuristics run branch and bound on sub-models with columns fixed (RINS and others): their
    // LPs bound nothing here. Those have a parent model; branch and bound's own has none.
    if (model_ == nullptr || model_->parentModel() != nullptr) return noAction;
    progress.bab = model_;
    if (which == generatedCuts && model_->getNodeCount() == 0 && model_->solver()->isProvenOptimal())
      progress.lp_bound = std::max(progress.lp_bound, model_->solver()->getObjValue());
    return noAction;
  }
  CbcEventHandler* clone() const override { return new ProgressEvents(*this); }
};

// A lower bound on the LP's optimum from any row prices y, with the objective c, the rows
// lo <= Ax <= hi and the columns l <= x <= u (weak duality: for every feasible x,
// c'x = y'Ax + (c - A'y)'x, and each term is at least its least over the row's or column's bounds
// once y has the sign its row allows). Any y gives a valid bound; the optimal duals give the optimum.
// Long double: the sums cancel to a small number from large terms.
double lagrangian_bound(const ClpSimplex& lp, const double* prices) {
  const int m = lp.numberRows();
  const double *lo = lp.rowLower(), *hi = lp.rowUpper();
  std::vector<double> y(prices, prices + m);
  long double bound = 0;
  for (int r = 0; r < m; ++r) {
    if ((y[r] > 0 && lo[r] < -1e30) || (y[r] < 0 && hi[r] > 1e30)) y[r] = 0;  // a sign the row does not allow
    if (y[r] != 0) bound += static_cast<long double>(y[r]) * (y[r] > 0 ? lo[r] : hi[r]);
  }
  const CoinPackedMatrix& a = *lp.matrix();  // by column
  const int* rows = a.getIndices();
  const double* elements = a.getElements();
  const CoinBigIndex* starts = a.getVectorStarts();
  const int* lengths = a.getVectorLengths();
  const double *c = lp.objective(), *l = lp.columnLower(), *u = lp.columnUpper();
  for (int j = 0; j < lp.numberColumns(); ++j) {
    long double reduced = c[j];
    for (CoinBigIndex k = starts[j]; k < starts[j] + lengths[j]; ++k)
      reduced -= static_cast<long double>(elements[k]) * y[rows[k]];
    const double at = reduced < 0 ? u[j] : l[j];
    if (reduced != 0 && std::fabs(at) > 1e30) return -COIN_DBL_MAX;  // unbounded that way: no bound
    bound += reduced * at;
  }
  return static_cast<double>(bound);
}

// The LP relaxation of a full-strategy solve within `seconds` of wall clock. First an easy LP is
// told apart cheaply: primal simplex from the ILP's start (Clp's values pass), for at most a pivot
// per 20 rows and a twentieth of the limit. Where the start is an optimum of the LP or close to one
// (exact mode's MILPs at the liveness peak) it ends within that, and Clp's own initial solve
// follows, as without a limit: on resnet50 b64's MILP with offload (293,071 rows, model:h100) the
// values pass took 445 pivots (0.7 s), Clp's initial solve 2.5 s, and the presolved dual below
// 26 s. Elsewhere it costs about a second (resnet20 b64 at 70 %: 22,085 pivots, 10.9 s, to the
// end; its cap is 2,535).
//
// Otherwise dual simplex on the presolved LP. Optimal: the solver holds an optimal basis, which
// CBC's root starts from, and the bound is the optimum. Stopped by the limit: the bound is the
// Lagrangian one of the prices dual simplex had reached (above), valid for the presolved LP, whose
// optimum is the LP's (presolve keeps it, and Clp reports the objective offset it removed), so
// valid here. Dual simplex's prices improve as it goes, late more than early: on the offload MILPs
// of resnet20 b64, model:h100, the bound after 15 and 32 s of a 41 s solve (25 % of the peak) was
// 27 and 90 % of the optimum, after 31 and 42 s of a 63 s one (35 %) 0 and 85 %. (Without presolve
// it rises sooner, 65 % after 10 s, but the LP takes up to three times as long.) Before, a solve
// whose LP --time-limit stopped reported the trivial bound, or the last one this process had found
// for another ILP.
//
// Where the LP ended within a quarter of the limit, Clp's own initial solve runs again from
// scratch: CBC's search depends on the root's basis, and from this one it did worse on a small
// case (the offload MILP of test_passes's five-layer network on model:k40: not proven optimal
// within its 100 nodes, against 16 from Clp's own basis). Beyond a quarter, CBC keeps this basis:
// solving twice would leave it little time. Anything else (presolve or Clp gives up): Clp's
// initial solve.
struct RootLp {
  bool optimal = false;
  bool stopped = false;          // by the limit
  double bound = -COIN_DBL_MAX;  // in the solver's (scaled) objective units
};

// The probe above: the LP's optimum when primal simplex from `start` reaches it within its caps.
std::optional<double> optimum_from(const OsiClpSolverInterface& solver, const std::vector<std::int64_t>& start,
                                   double seconds) {
  if (start.empty()) return std::nullopt;
  ClpSimplex lp(*solver.getModelPtr());  // a copy
  lp.setLogLevel(0);
  std::copy(start.begin(), start.end(), lp.primalColumnSolution());
  lp.setMaximumIterations(lp.numberRows() / 20);
  lp.setMaximumWallSeconds(seconds);
  lp.primal(1);
  if (lp.status() != 0) return std::nullopt;
  return lp.objectiveValue();
}

RootLp solve_root_lp_within(OsiClpSolverInterface& solver, double seconds, const std::vector<std::int64_t>& start) {
  const auto started = std::chrono::steady_clock::now();
  ClpSimplex lp(*solver.getModelPtr());  // a copy: the solver's own model stays as CBC expects it
  lp.setLogLevel(0);                     // the presolve below logs through it ("Coin0506I Presolve ...")
  ClpPresolve presolve;
  const std::optional<double> easy = optimum_from(solver, start, seconds / 20);
  // Clp's own solve below has no limit of its own: the child's deadline sends this bound meanwhile.
  if (easy) progress.lp_bound = *easy;
  ClpSimplex* reduced = easy ? nullptr : presolve.presolvedModel(lp, 1e-8);
  RootLp root;
  int status = -1;
  if (reduced != nullptr) {
    reduced->setLogLevel(0);
    reduced->setMaximumWallSeconds(seconds);
    reduced->dual();
    status = reduced->status();
    root.stopped = status == 3;
    if (root.stopped) root.bound = lagrangian_bound(*reduced, reduced->dualRowSolution()) - reduced->objectiveOffset();
    if (status == 0) presolve.postsolve(true);  // the optimal solution and basis back on the copy
    delete reduced;
    if (root.stopped) return root;
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (status == 0 && took > seconds / 4) {
    lp.setLogLevel(0);
    lp.primal(1);  // Clp's clean-up after a postsolve: no pivots when the basis is optimal as it is
    // The basis in Osi's conventions (a slack's bound flipped from Clp's) through an interface
    // over the copy, then onto the solver, which starts from it.
    OsiClpSolverInterface view(&lp, false);
    std::vector<int> columns(static_cast<std::size_t>(lp.numberColumns())),
        rows(static_cast<std::size_t>(lp.numberRows()));
    view.getBasisStatus(columns.data(), rows.data());
    solver.setBasisStatus(columns.data(), rows.data());
    solver.resolve();
  } else {
    solver.initialSolve();
  }
  root.optimal = solver.isProvenOptimal();
  if (root.optimal)
    root.bound = solver.getObjValue();
  else if (easy)
    root.bound = *easy;
  return root;
}

CbcAnswer run_cbc(const Ilp& ilp, bool full_strategy) {
  const int n = int(ilp.objective.size());
  const double inf = COIN_DBL_MAX;

  // The rows in compressed form, then one matrix: appending rows one at a time to a
  // CoinPackedMatrix copies it each time (the offload MILP of resnet20 b64, 50,692 rows, took 20 s
  // of its 60 s that way).
  std::vector<CoinBigIndex> starts{0};
  std::vector<int> columns;
  std::vector<double> elements, row_lo, row_hi;
  for (const IlpRow& r : ilp.rows) {
    std::uint64_t largest = magnitude(r.rhs);
    for (const IlpTerm& t : r.terms) largest = std::max(largest, magnitude(t.coef));
    // Each row scaled to at most 2^16 in magnitude, so Clp's absolute tolerances (1e-7) stay
    // far below one unit of any row.
    const double s = power_of_two_scale(largest, 16);
    for (const IlpTerm& t : r.terms)  // each variable at most once (ilp.h)
      if (t.coef != 0) {
        columns.push_back(t.var);
        elements.push_back(double(t.coef) * s);
      }
    starts.push_back(CoinBigIndex(columns.size()));
    const double rhs = double(r.rhs) * s;
    row_lo.push_back(r.sense == IlpSense::le ? -inf : rhs);
    row_hi.push_back(r.sense == IlpSense::ge ? inf : rhs);
  }
  // CBC 2.10 / Clp 1.17 abort on an assertion in OsiClpSolverInterface::markHotStart for some
  // models of fewer than 3 rows (coin-or/Cbc#738, coin-or/Clp#288; seen here on
  // min 31a + 32b, -3a <= 0, 8a + 19b >= 8). Empty rows 0 <= 0 pad the model to 3.
  while (row_lo.size() < 3) {
    starts.push_back(starts.back());
    row_lo.push_back(-inf);
    row_hi.push_back(0.0);
  }
  const int m = int(row_lo.size());
  CoinPackedMatrix matrix;
  matrix.copyOf(false, n, m, starts.back(), elements.data(), columns.data(), starts.data(), nullptr);  // rows

  // Objective at most 2^20 (nanoseconds become ~microseconds). All objective values are
  // multiples of g = gcd of the coefficients, so a better solution is better by at least g:
  // the cutoff increment and allowable gap are half of that, which proves exact optimality
  // while tolerating LP round-off below g/2.
  std::uint64_t largest = 0, g = 0;
  for (std::int64_t c : ilp.objective) {
    largest = std::max(largest, magnitude(c));
    g = std::gcd(g, magnitude(c));
  }
  const double obj_scale = power_of_two_scale(largest, 20);
  progress.obj_scale = obj_scale;
  std::vector<double> obj(n), col_lo(n, 0.0), col_hi(n);
  for (int j = 0; j < n; ++j) {
    obj[j] = double(ilp.objective[j]) * obj_scale;
    col_hi[j] = double(upper_of(ilp, j));
  }

  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.setHintParam(OsiDoReducePrint, true, OsiHintTry);
  solver.loadProblem(matrix, col_lo.data(), col_hi.data(), obj.data(), row_lo.data(), row_hi.data());
  for (int j = 0; j < n; ++j) solver.setInteger(j);
  // The LP relaxation first: its optimum bounds the ILP whatever CBC does after it, and the model
  // below starts from its basis, so CBC's root solve costs nothing more. CBC itself reports a bound
  // only after its first round of cuts, which on the rematerialisation MILP of resnet50 b64 (70,658
  // variables) did not end within exact mode's 45 s: the bound was then the trivial one (+1.4 %
  // over the ideal at 85 % of the peak on model:h100 where this LP, solved in under a second,
  // gives +2.4 %).
  // This solve's own bound from here on: a forked child inherits the parent's last value (another
  // ILP's), which its deadline would otherwise send while this LP is being solved.
  double root_lp = -COIN_DBL_MAX;
  progress.lp_bound = root_lp;
  if (full_strategy && ilp.max_seconds > 0) {
    // Within the time limit, less what sending the answer and Clp's checks between pivots take,
    // so that its bound is sent before the child's deadline (start_cbc_child).
    const RootLp root = solve_root_lp_within(solver, std::max(0.5 * ilp.max_seconds, ilp.max_seconds - 2.0), ilp.start);
    root_lp = root.bound;
    if (root.stopped) {  // no time left for CBC
      CbcAnswer a;
      a.bound = root.bound / obj_scale;
      return a;
    }
  } else {
    solver.initialSolve();
    if (solver.isProvenOptimal()) root_lp = solver.getObjValue();
  }
  progress.lp_bound = root_lp;

  CbcModel model(solver);  // clones the solver
  model.setLogLevel(0);
  model.solver()->messageHandler()->setLogLevel(0);
  model.setNumberThreads(0);
  if (g > 0) {
    model.setCutoffIncrement(0.5 * double(g) * obj_scale);
    model.setAllowableGap(0.5 * double(g) * obj_scale);
  }
  model.setAllowableFractionGap(0.0);
  if (ilp.max_nodes > 0) model.setMaximumNodes(int(std::min<std::int64_t>(ilp.max_nodes, INT32_MAX)));
  if (ilp.max_seconds > 0) {
    model.setUseElapsedTime(true);  // wall clock: CPU time lags it on a loaded machine
    model.setMaximumSeconds(ilp.max_seconds);
  }
  if (!ilp.start.empty()) {
    std::vector<double> start(ilp.start.begin(), ilp.start.end());
    model.setBestSolution(start.data(), n, COIN_DBL_MAX, true);  // kept only if feasible
  }
  if (full_strategy) {
    std::vector<std::pair<std::string, double>> start;
    if (!ilp.start.empty()) {
      for (int j = 0; j < n; ++j) {
        model.solver()->setColName(j, "x" + std::to_string(j));
        start.emplace_back("x" + std::to_string(j), double(ilp.start[j]));
      }
      model.setMIPStart(start);
    }
    CbcMain0(model);
    std::vector<std::string> args{"ucplan", "-log", "0", "-threads", "0"};
    // CglPreProcess crashes inside ClpPresolve on some small rematerialisation MILPs (seen: the
    // five-activation network of test_passes at 55 % of its peak on model:k40); without it the
    // bounds and solutions on ResNet-20 are as good.
    args.push_back("-preprocess");
    args.push_back("off");
    if (ilp.max_seconds > 0) {
      args.push_back("-seconds");
      args.push_back(std::to_string(ilp.max_seconds));
    }
    if (ilp.max_nodes > 0) {
      args.push_back("-maxNodes");
      args.push_back(std::to_string(ilp.max_nodes));
    }
    args.push_back("-solve");
    args.push_back("-quit");
    std::vector<const char*> argv;
    for (const auto& arg : args) argv.push_back(arg.c_str());
    const ProgressEvents events;
    model.passInEventHandler(&events);  // a clone, which CbcMain1's copy of the model clones again
    CbcMain1(int(argv.size()), argv.data(), model);
    progress.bab = nullptr;  // CbcMain1 has copied its answer back into `model`
  } else {
    // Local search and rounding heuristics: on ResNet-152-sized WD problems they cut the slow tail
    // (90th percentile over 49 totals 48 ms instead of 75 ms; strong-branching, Gomory and
    // knapsack-cover variants measured no better).
    CbcHeuristicLocal local(model);
    CbcRounding rounding(model);
    model.addHeuristic(&local);
    model.addHeuristic(&rounding);
    model.initialSolve();  // branchAndBound starts from the solver's current LP solution
    model.branchAndBound();
  }

  CbcAnswer a;
  a.nodes = model.getNodeCount();
  a.infeasible = model.isProvenInfeasible();
  a.proven_optimal = model.isProvenOptimal();
  a.bound = std::max(model.getBestPossibleObjValue(), root_lp) / obj_scale;
  if (const double* best = model.bestSolution()) {
    a.x.resize(n);
    // Integer variables are within CBC's integer tolerance (1e-6) of an integer.
    for (int j = 0; j < n; ++j) a.x[j] = std::clamp<std::int64_t>(std::llround(best[j]), 0, upper_of(ilp, j));
  }
  return a;
}

// CBC 2.10's full strategy can crash (seen: a segfault in CbcNode::chooseDynamicBranch on the
// rematerialisation MILP of resnet20 b64, model:v100, at 85 % of its peak; CglPreProcess in
// ClpPresolve on a small one). It runs in a child process, which sends its answer back through a
// pipe; if the child dies or sends no complete answer, nullopt, and the caller solves in-process
// with plain branch and bound instead. The child has one thread (fork copies only the caller's),
// which is all CBC needs here.
bool write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t w = ::write(fd, p, size);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    size -= static_cast<std::size_t>(w);
  }
  return true;
}

// The child's answer on the pipe, as the parent reads it: infeasible, proven optimal, nodes and
// the solution's length, then the bound, then the solution. Only write(2): the deadline's signal
// handler sends it too.
bool send_answer(int fd, std::int64_t infeasible, std::int64_t proven_optimal, std::int64_t nodes, double bound,
                 const std::int64_t* x, std::int64_t nx) {
  const std::int64_t head[4] = {infeasible, proven_optimal, nodes, nx};
  return write_all(fd, head, sizeof head) && write_all(fd, &bound, sizeof bound) &&
         write_all(fd, x, static_cast<std::size_t>(nx) * sizeof(std::int64_t));
}

// CBC's own time limit is checked between nodes, not between the root's cut passes: on large
// rematerialisation MILPs (resnet50 b64, 70,000 variables) the root alone took 81 s under a 60 s
// limit. So the child also has a deadline of its own, a little after CBC's: a timer signal, whose
// handler sends what is known then (the incumbent branch and bound holds, if any; the root LP's
// bound after its last round of cuts, or branch and bound's once it has nodes; before the first
// round, which on resnet50 b64 takes over 16 s, the LP relaxation's, solved before CBC starts)
// and exits. The parent checks that answer as any other (an incumbent read mid-update fails the
// exact check and is dropped), and kills a child that sends nothing well after the deadline. An
// alarm after CBC returned but before the timer is stopped sends the same answer with less in it.
constexpr double kDeadlineGraceSeconds = 1.0;

void send_at_deadline(int) {
  CbcModel* bab = progress.bab;
  const Ilp& ilp = *progress.ilp;
  const std::size_t n = ilp.objective.size();
  double bound = progress.lp_bound;
  const std::int64_t nodes = bab ? bab->getNodeCount() : 0;
  if (bab && nodes > 0) bound = std::max(bound, bab->getBestPossibleObjValue());
  bound = bound > -1e300 ? bound / progress.obj_scale : -COIN_DBL_MAX;
  std::int64_t nx = 0;
  if (const double* best = bab && std::size_t(bab->getNumCols()) == n ? bab->bestSolution() : nullptr) {
    for (std::size_t j = 0; j < n; ++j)
      progress.x[j] = std::clamp<std::int64_t>(std::llround(best[j]), 0, upper_of(ilp, j));
    nx = static_cast<std::int64_t>(n);
  }
  const bool ok = send_answer(progress.fd, 0, 0, nodes, bound, progress.x, nx);
  ::_exit(ok ? 0 : 1);
}

// A child solving with CBC's full strategy (pid -1: it could not be started), and when the parent
// gives up waiting for it.
struct CbcChild {
  pid_t pid = -1;
  int fd = -1;  // the read end of its pipe
  bool deadline = false;
  std::chrono::steady_clock::time_point kill_at;
};

// solve_ilp may also be called from several threads at once (with glibc's malloc a fork survives
// another thread's allocation; solve_ilps needs no such luck). A child inherits every descriptor
// open at its fork: had it another solve's pipe's write end, that parent would see no end of its
// answer until both children had exited. So a pipe's write end stays open in this process only
// while this lock is held, from pipe() to the close after fork.
std::mutex forking;

CbcChild start_cbc_child(const Ilp& ilp) {
  int fds[2];
  const std::lock_guard<std::mutex> lock(forking);
  if (::pipe(fds) != 0) return {};
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {};
  }
  if (pid == 0) {  // the child: solve, send, and leave without running the parent's exit handlers
    // It dies with the process that wants its answer (killed, aborted, or stopped by `timeout`):
    // no CBC solves on for up to the time limit with nobody to hear it. The signal follows the
    // thread that forked, which waits for this child before it returns, so it never comes early.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // that process died before the line above
    ::close(fds[0]);
    if (std::getenv("UCPLAN_TEST_CBC_CHILD_CRASH")) ::raise(SIGKILL);  // fault injection for the fallback test
    std::vector<std::int64_t> room(ilp.objective.size());
    progress.ilp = &ilp;
    progress.x = room.data();
    progress.fd = fds[1];
    if (ilp.max_seconds > 0) {
      std::signal(SIGALRM, send_at_deadline);
      const double at = ilp.max_seconds + kDeadlineGraceSeconds;
      itimerval timer{};
      timer.it_value.tv_sec = static_cast<time_t>(at);
      timer.it_value.tv_usec = static_cast<suseconds_t>((at - std::floor(at)) * 1e6);
      ::setitimer(ITIMER_REAL, &timer, nullptr);
    }
    const CbcAnswer a = run_cbc(ilp, true);
    if (ilp.max_seconds > 0) {  // from here on the answer below is sent, not the deadline's
      const itimerval off{};
      ::setitimer(ITIMER_REAL, &off, nullptr);
    }
    const bool ok = send_answer(fds[1], a.infeasible, a.proven_optimal, a.nodes, a.bound, a.x.data(),
                                static_cast<std::int64_t>(a.x.size()));
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  CbcChild c;
  c.pid = pid;
  c.fd = fds[0];
  // A child that has sent nothing complete well after its own deadline is killed.
  c.deadline = ilp.max_seconds > 0;
  c.kill_at = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(ilp.max_seconds + 10 * kDeadlineGraceSeconds + 10.0));
  return c;
}

// The child's answer; nullopt if it died or sent no complete answer.
std::optional<CbcAnswer> finish_cbc_child(const CbcChild& c) {
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    if (c.deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(c.kill_at - std::chrono::steady_clock::now());
      pollfd p{c.fd, POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        ::kill(c.pid, SIGKILL);
        break;
      }
    }
    const ssize_t r = ::read(c.fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    bytes.append(buf, static_cast<std::size_t>(r));
  }
  ::close(c.fd);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  std::int64_t head[4];
  double bound = 0;
  if (bytes.size() < sizeof head + sizeof bound) return std::nullopt;
  std::memcpy(head, bytes.data(), sizeof head);
  std::memcpy(&bound, bytes.data() + sizeof head, sizeof bound);
  const std::size_t nx = static_cast<std::size_t>(head[3]);
  if (head[3] < 0 || bytes.size() != sizeof head + sizeof bound + nx * sizeof(std::int64_t)) return std::nullopt;
  CbcAnswer a;
  a.infeasible = head[0] != 0;
  a.proven_optimal = head[1] != 0;
  a.nodes = head[2];
  a.bound = bound;
  a.x.resize(nx);
  if (nx > 0) std::memcpy(a.x.data(), bytes.data() + sizeof head + sizeof bound, nx * sizeof(std::int64_t));
  return a;
}

std::optional<CbcAnswer> run_cbc_isolated(const Ilp& ilp) {
  const CbcChild c = start_cbc_child(ilp);
  return c.pid > 0 ? finish_cbc_child(c) : std::nullopt;
}

// The in-process solves of solve_ilp (plain branch and bound, and the fallback when a child
// fails), one at a time: run_cbc's Progress is one for the process, and solve_ilp may be called
// from several threads.
std::mutex in_process;

void check_ilp(const Ilp& ilp) {
  const std::size_t n = ilp.objective.size();
  UCPLAN_CHECK(ilp.upper.empty() || ilp.upper.size() == n, "ILP bounds have the wrong size");
  for (std::int64_t u : ilp.upper) UCPLAN_CHECK(u >= 0, "ILP variable with a negative bound");
  for (const IlpRow& r : ilp.rows)
    for (const IlpTerm& t : r.terms)
      UCPLAN_CHECK(t.var >= 0 && std::size_t(t.var) < n, "ILP term refers to no variable");
  UCPLAN_CHECK(ilp.start.empty() || ilp.start.size() == n, "ILP start has the wrong size");
}

}  // namespace

std::string find_ilp_violation(const Ilp& ilp, const std::vector<std::int64_t>& x) {
  if (x.size() != ilp.objective.size()) return "solution has the wrong number of variables";
  for (std::size_t j = 0; j < x.size(); ++j)
    if (x[j] < 0 || x[j] > upper_of(ilp, j)) return "variable " + std::to_string(j) + " is out of its bounds";
  for (std::size_t r = 0; r < ilp.rows.size(); ++r)
    if (!row_holds(ilp.rows[r].sense, activity(ilp.rows[r], x), ilp.rows[r].rhs))
      return "row " + std::to_string(r) + " is violated";
  return "";
}

namespace {

// The rest of solve_ilp once its first full-strategy child, if it has one, is running: `first` is
// that child (null: none was started for it), `started` when it was.
IlpResult finish_ilp(const Ilp& ilp, const CbcChild* first, std::chrono::steady_clock::time_point started) {
  IlpResult res;
  const bool start_ok = !ilp.start.empty() && find_ilp_violation(ilp, ilp.start).empty();
  // Tolerances can make CBC accept a point that, rounded to integers, violates an inequality by a
  // few units (bytes). Then that row's rhs is tightened by the violation and the model solved
  // again; the exact check below is what decides feasibility, never CBC's own.
  Ilp model = ilp;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const bool running = attempt == 0 && first && first->pid > 0;  // a child to hear from, whatever the time
    if (ilp.max_seconds > 0 && !running) {                         // one limit for all attempts together
      model.max_seconds =
          ilp.max_seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (model.max_seconds <= 0) break;
    }
    std::optional<CbcAnswer> full;
    if (model.full_strategy) {
      if (attempt == 0 && first)  // started by solve_ilps (or not, if it could not be)
        full = first->pid > 0 ? finish_cbc_child(*first) : std::nullopt;
      else
        full = run_cbc_isolated(model);
      if (!full) {  // the full strategy failed: plain branch and bound from here on, in the time left
        model.full_strategy = false;
        ++res.full_strategy_failures;
        if (ilp.max_seconds > 0) {
          model.max_seconds =
              ilp.max_seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          if (model.max_seconds <= 0) break;
        }
      }
    }
    CbcAnswer a;
    if (full) {
      a = std::move(*full);
    } else {
      const std::lock_guard<std::mutex> one(in_process);
      a = run_cbc(model, false);
    }
    res.nodes += a.nodes;
    // The bound of the first solve holds for the original rows (tightened ones only cut off
    // points); rounded down, with a tolerance for the LP's round-off.
    // (A bound beyond int64, e.g. CBC's 1e52 when it proves nothing, is not converted: that
    // cast is undefined behaviour, found by the sanitizer build.)
    if (attempt == 0 && a.bound > -1e300 && std::fabs(a.bound) < 0x1p62)
      res.bound = static_cast<std::int64_t>(std::floor(a.bound - 1e-6 * std::max(1.0, std::fabs(a.bound))));
    if (a.x.empty()) {
      if (a.infeasible && res.tightenings == 0 && !start_ok) res.status = IlpStatus::infeasible;
      break;
    }
    int violated = -1;
    Wide act = 0;
    for (std::size_t r = 0; r < ilp.rows.size() && violated < 0; ++r) {
      act = activity(ilp.rows[r], a.x);
      if (!row_holds(ilp.rows[r].sense, act, ilp.rows[r].rhs)) violated = int(r);
    }
    if (violated < 0) {
      res.x = std::move(a.x);
      res.status = a.proven_optimal && res.tightenings == 0 ? IlpStatus::optimal : IlpStatus::feasible;
      break;
    }
    IlpRow& row = model.rows[violated];
    if (row.sense == IlpSense::eq) break;  // nothing to tighten; fall back below
    // The model's rhs is at least as tight as the original one, so the answer violates it by at
    // least as much; tighten by exactly that.
    const Wide over = row.sense == IlpSense::le ? act - row.rhs : row.rhs - act;
    row.rhs += std::int64_t(row.sense == IlpSense::le ? -over : over);
    ++res.tightenings;
  }
  if (res.x.empty() && start_ok) {
    res.x = ilp.start;
    res.status = IlpStatus::feasible;
  }
  if (!res.x.empty()) res.objective = exact_objective(ilp, res.x);
  if (res.status == IlpStatus::optimal) res.bound = res.objective;
  if (!res.x.empty()) res.bound = std::min(res.bound, res.objective);
  return res;
}

}  // namespace

IlpResult solve_ilp(const Ilp& ilp) {
  check_ilp(ilp);
  return finish_ilp(ilp, nullptr, std::chrono::steady_clock::now());
}

std::vector<IlpResult> solve_ilps(const std::vector<const Ilp*>& ilps) {
  for (const Ilp* ilp : ilps) check_ilp(*ilp);
  const auto started = std::chrono::steady_clock::now();
  std::vector<CbcChild> first(ilps.size());
  for (std::size_t k = 0; k < ilps.size(); ++k)
    if (ilps[k]->full_strategy) first[k] = start_cbc_child(*ilps[k]);
  std::vector<IlpResult> results;
  for (std::size_t k = 0; k < ilps.size(); ++k)
    results.push_back(finish_ilp(*ilps[k], ilps[k]->full_strategy ? &first[k] : nullptr, started));
  return results;
}

}  // namespace ucplan
