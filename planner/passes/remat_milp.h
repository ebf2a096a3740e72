// Exact mode's rematerialisation MILP (Checkmate, Jain et al., MLSys 2020, §4, restricted as in
// their "forward-only rematerialisation" setting): stages are the round's tasks in route order;
// in stage t the task T_t runs, after any forward layers recomputed for it. Per activation i
// (the output of a forward layer other than the input and the loss) and stage t in its span:
//   R[t,i] = 1  i is recomputed in stage t (its forward task re-run),
//   S[t,i] = 1  i is on the device when stage t starts (kept from stage t-1).
// Rows (Checkmate Eq. 1b-1d and a relaxation of its memory accounting, Eq. 2):
//   T_t reads i                      R[t,i] + S[t,i] >= 1
//   recomputing i needs its input j  R[t,i] <= R[t,j] + S[t,j]
//   keeping needs a value            S[t+1,i] <= S[t,i] + R[t,i]
//   T_t's conv configuration         Σ_c Z[t,c] = 1   (Z: T_t runs with Pareto-front entry c)
//   memory when T_t runs             fixed(t) + touched(t) + Σ_c ws_c Z[t,c]
//                                      + Σ_{i not touched} bytes_i S[t+1,i] <= budget
// where fixed(t) holds weights and their gradients, the activation gradients and saved
// statistics live at t; touched(t) what T_t reads and writes; ws_c the workspace of T_t's
// configuration c (the configuration is chosen with the residency, as the issue asks and as
// mu-cuDNN's WD divides a workspace among kernels; fixed under --workspace wr:/wd:). Every
// value kept into stage t+1 is on the device when T_t runs (recomputations precede T_t), so the
// row holds for every recompute-only schedule in route order: the memory of a recomputation's
// own moment is not counted, and sizes are rounded down to the row's unit. The MILP is therefore
// a relaxation, and its optimum (or CBC's proven bound) plus the copy of the batch that every
// round waits for before its first task is a lower bound on the round time of any recompute-only
// plan whose tasks run in route order. Recomputations are counted at their fastest configuration
// (their moment's memory is not modelled).
//   minimise Σ_{t,i} time_i R[t,i] + Σ_{t,c} (time_{t,c} - fastest_t) Z[t,c]
//   (time_i: the fastest configuration of i's forward task)
// With `offload` (exact mode when offload is allowed) the MILP also relaxes every plan that copies
// tensors to the host and back, as POET (Patil et al., ICML 2022, §3) adds paging to Checkmate's
// rows, but timed the way this engine runs copies (copy streams beside the compute stream):
//   P[t,i] = 1  i is brought back from the host for stage t (a third way to have it in the rows
//               above: R[t,i] + S[t,i] + P[t,i] >= 1 where T_t reads i, and likewise for keeping
//               and for a recomputation's inputs);
//   E_s         the moment T_s starts (E_0 = 0): E_{s+1} = E_s + T_s + stage s+1's
//               recomputations + w_s, where w_s >= 0 is time compute waits (for a copy, for memory);
//   E_t - E_born_i >= (d2h_i + h2d_i) P[t,i]   the copy out follows i's birth, the copy back
//               ends before T_t starts;
//   C_s = C_{s-1} + Σ_i h2d_i P[s,i] + ..., C_s <= E_s   one host-to-device stream carries every
//               arrival up to stage s before T_s starts;
//   G = 1       an undecided tensor that is not resident (an activation gradient, a batch-norm
//               statistic: the engine offloads any of them on demand) leaves the device between
//               two stages that touch it, freeing its bytes in the stages between, where its copy
//               out and back fits between their moments (a row like P's) and on the stream (C);
//   A[s,i] = 1  i is absent when stage s starts and recomputed by its next read u (A[s,i] <=
//               R[s,i] + A[s+1,i], A[u,i] <= R[u,i]); what is absent and not recomputed was copied
//               out before it left: S[s,i] + Y[s,i] + A[s,i] >= 1 (without these rows the LP
//               copied out a fraction late and brought it back, or a tenth at a time: no overhead
//               at all at 50 % of resnet20's peak);
// and adds Σ_s w_s to the objective. Compute times are rounded up in E and copy times down, with
// a unit of slack per stage, so the moments of every plan satisfy the rows, and the bound holds
// for every plan in route order, offloading or not. Memory in flight (a buffer allocated when its
// copy starts) and the device-to-host stream's queue are left out (a relaxation). With
// P = G = w = 0 the rows are the recompute-only MILP's, so the bound is never above that one's.
// The solution is run stage by stage (StagedPlan: what is kept into each stage; the simulator
// recomputes the rest when a task needs it), and read as a residency table (recompute what the
// solution recomputes in the backward pass, keep the rest) it seeds the ucplan search; both are
// simulated and verified like every other. The MILP's first incumbent is a plan read back from
// the simulator stage by stage (the default search's best without offload), so CBC starts where
// the default ends.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "costs.h"
#include "planner/solve/ilp.h"
#include "strategies.h"

namespace ucplan {

struct RematMilpResult {
  enum class Status { optimal, feasible, infeasible, no_solution };
  Status status = Status::no_solution;
  std::int64_t bound_round_ns = 0;     // lower bound on a round (recompute-only unless `offload`)
  std::int64_t solution_round_ns = 0;  // the MILP's own round time of its solution (same model)
  std::vector<Residency> table;        // per tensor: Keep or Recompute (empty without a solution)
  StagedPlan staged;                   // the solution stage by stage (empty without a solution)
  std::vector<int> config;             // per task: the solution's front index (-1: not a conv kernel)
  bool offload = false;                // offload modelled: the bound holds for plans that offload too
  bool started_from_plan = false;      // the given start satisfied the rows and was CBC's first incumbent
  bool plain_fallback = false;         // CBC's full strategy failed (IlpResult::full_strategy_failures)
  int variables = 0, rows = 0;
  // Infeasible before any solve: the task that alone does not fit and what it needs ("backward of
  // layer r1 needs 526 KiB at once (...), over the 414 KiB budget"), for the report; else empty.
  std::string infeasible_why;
  std::int64_t nodes = 0;
  double seconds = 0;
  // A solution was found, so bound_round_ns is a proven bound (optimal or feasible).
  bool solved() const { return status == Status::optimal || status == Status::feasible; }
  // The round's first copy, of the batch's input before the first task: part of both times above.
  std::int64_t entry_ns = 0;
  // A lower bound on a round of every plan, those that carry the batch's input across rounds
  // (plan.h) included: such a plan with that copy put back at its start instead (into the carried
  // buffer, every step after it later by the copy's time, the ahead prefetch gone) is a plan the
  // MILP bounds, entry_ns slower at most.
  std::int64_t any_plan_bound_round_ns() const { return bound_round_ns - entry_ns; }
};
const char* remat_milp_status_name(RematMilpResult::Status s);

// max_seconds <= 0: no time limit (the solve ends when CBC proves optimality). `start`, if not
// null, is a simulated plan recorded stage by stage (ScheduleInput::record_stages) read as the
// MILP's first incumbent: S from what is on the device when each stage starts, R from what it
// recomputes, Z from the configurations it ran; it is used only if it satisfies the MILP's rows.
// `fixed_config` (ScheduleInput::fixed_config): per task, a configuration fixed by WR/WD, or -1.
// `offload`: copies to the host and back are modelled too (above), so the bound holds for plans
// that offload; the solution's tensors brought back are Offload in its tables.
RematMilpResult solve_remat_milp(const Graph& g, const TaskGraph& tg, const CostTable& costs, std::int64_t budget_bytes,
                                 double max_seconds, const ScheduleResult* start = nullptr,
                                 const std::vector<int>& fixed_config = {}, bool offload = false);

// solve_remat_milp in two halves, for MILPs solved together (solve_ilps: exact mode's two side by
// side): the ILP, and what its answer means. `solve` is false when the answer is known without
// solving (a task alone does not fit: infeasible); then `read` ignores its argument.
struct RematMilp {
  Ilp ilp;
  bool solve = true;
  std::function<RematMilpResult(const IlpResult&)> read;
};
RematMilp build_remat_milp(const Graph& g, const TaskGraph& tg, const CostTable& costs, std::int64_t budget_bytes,
                           double max_seconds, const ScheduleResult* start = nullptr,
                           const std::vector<int>& fixed_config = {}, bool offload = false);

}  // namespace ucplan
