// Schedule pass (moDNN Alg. 1, §IV-B): simulate one round of tasks in route order on a compute
// stream and two copy streams with a first-fit arena at static offsets. Per task: make its
// inputs resident (prefetch from host, or recompute if dropped), allocate its outputs,
// offloading on an allocation failure with the scheme of least delay (defragmenting when none
// exists), pick a conv configuration, prefetch for later tasks by Eq. (4), then run it and free
// what is dead. The strategy (policy) plugs in through the Strategy interface; the mechanism is
// the same for every strategy, so comparisons are made in one simulator.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "costs.h"
#include "planner/model/plan.h"

namespace ucplan {

// What happens to a tensor between its last forward use and its first backward use.
enum class Residency {
  Keep,       // stays on the device; may be offloaded on demand (tensor cache) if the strategy allows
  Offload,    // copied to the host right after it is produced (overlapped), freed after its last
              // forward use, prefetched before its first backward use (vDNN, moDNN)
  Recompute,  // freed after its last forward use, recomputed from its producer's inputs when a
              // backward task needs it (SuperNeurons §3.4, Chen et al.'s checkpointing)
  Hold,       // as Recompute, but once recomputed in the backward pass it stays on the device to
              // its last use: never dropped to make room (a strategy that offloads may still
              // offload it on demand, as a kept value), so the backward pass redoes it once. Checkmate
              // decides per stage and may keep a value recomputed in one stage for the later ones
              // (issue 11: one decision per tensor for the whole pass cannot say that); this is
              // that decision per tensor, which the search makes (search.cpp hold_recomputed).
};
const char* residency_name(Residency r);
// Dropped after its forward uses and recomputed for the backward pass (Recompute or Hold).
inline bool recomputed(Residency r) { return r == Residency::Recompute || r == Residency::Hold; }

enum class PrefetchMode {
  Eq4,        // moDNN Eq. (4): look ahead, start a prefetch when waiting longer would delay its task
  NextLayer,  // vDNN: during a layer's backward, prefetch what the next layer's tasks need
  OnDemand,   // no look-ahead: copy in right before the task that needs it
};

// What a strategy sees when it picks a conv configuration.
struct ConfigContext {
  int task = -1;
  const TaskCost* cost = nullptr;              // the Pareto front
  std::int64_t largest_free = 0;               // contiguous bytes free now, without evicting anything
  std::vector<std::int64_t> evict_delay;       // per front entry: predicted delay (ns) to make room
  std::vector<std::int64_t> prefetch_penalty;  // per front entry: Eq. (5)'s delayed-prefetch term
  int fixed = -1;                              // WR/WD: the configuration fixed for this task
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual Residency residency(int tensor) const = 0;
  virtual PrefetchMode prefetch_mode() const = 0;
  // Tensor cache (SuperNeurons §3.3.2) / moDNN offloading: when an allocation fails, offload
  // something. Without it a strategy that does not fit fails, as the original systems do.
  virtual bool evict_on_demand() const = 0;
  // Index into ctx.cost->front.
  virtual std::size_t choose_config(const ConfigContext& ctx) = 0;
  // Whether activations may go to host memory at all (planned or on demand). Without it, only
  // values that cost no copy are evicted: recomputable ones, and those never produced.
  virtual bool may_offload() const { return true; }
  // A per-stage plan (exact mode's MILP, Checkmate's S matrix): whether a tensor planned for
  // recomputation stays on the device into round position `pos`. Without one (nullopt) it is
  // dropped once, after its last forward use, and kept from its recomputation to its last use.
  virtual std::optional<bool> keep_into(int /*tensor*/, int /*pos*/) const { return std::nullopt; }
};

// moDNN Eq. (5): gain = T_base - T_alg - T_off,alg - T_pre,alg; the maximum wins (ties: smaller
// workspace). Used by the ucplan strategy; exposed for tests.
std::size_t choose_config_by_gain(const ConfigContext& ctx);
// Eq. (5)'s T_pre for a workspace of `ws_bytes`: the next prefetch (`pre_bytes`, `pre_ns` of
// copies, its task `between_ns` of compute away) starts only after this task if the workspace
// leaves too little free memory for it, and is late by what those tasks cannot hide. Charged only
// where the copy would fit without the workspace: short of memory already, it waits anyway.
std::int64_t prefetch_penalty_ns(std::int64_t free_bytes, std::int64_t ws_bytes, std::int64_t pre_bytes,
                                 std::int64_t pre_ns, std::int64_t between_ns);
// SuperNeurons §3.5 / vDNN: the fastest configuration that fits in free memory now.
std::size_t choose_fastest_fitting(const ConfigContext& ctx);

// What every simulation of one task graph at one cost table needs and no strategy changes (the
// round's task order, each task's inputs and touched tensors, each layer's recomputation inputs,
// each tensor's uses before recomputation extends them): built once by a search that simulates
// hundreds of residency tables, instead of once per simulation. Opaque outside schedule.cpp.
struct ScheduleStatics;
std::shared_ptr<const ScheduleStatics> make_schedule_statics(const Graph& g, const TaskGraph& tg,
                                                             const CostTable& costs);

struct SimulationMemo;

// What a plan may carry across rounds (ScheduleInput::carry_input): the batch's inputs (host-input
// activations: the network's data) that the round's first task reads, without repeats.
std::vector<int> carriable_inputs(const TaskGraph& tg);

struct ScheduleInput {
  const Graph* graph = nullptr;
  const TaskGraph* tasks = nullptr;
  const CostTable* costs = nullptr;
  std::int64_t budget_bytes = 0;
  std::int64_t batch = 0;         // whole batch (host input buffers hold it)
  std::vector<int> fixed_config;  // per task: WR/WD choice (index into its front) or -1
  int lookahead = 24;             // Eq. (4) look-ahead window, in tasks
  bool best_fit = false;          // arena placement: moDNN's first fit, or best fit
  // Two-ended placement: what the forward pass keeps for the backward pass is placed from the
  // top of the arena down, everything else from the bottom up.
  bool two_ended = false;
  // Pool placement (Arena::Fit::Pool), when positive: the schedule counts bytes instead of placing
  // buffers, holding at most `pool_bytes` at once (the budget's weights and gradients included),
  // and its buffers are placed within budget_bytes once it is known (offsets.h); a recorded plan
  // that does not fit once placed fails. Fragmentation then costs no recomputation: on resnet50
  // b64 at 26 % of the peak, without offload, every table of the search failed in first fit with
  // 383 MiB free in five holes, none of them 196 MiB. An allocation waits for the histories of the
  // released bytes it takes (Arena::Fit::Pool), as one in first fit waits for its blocks', so the
  // placement may put it over the buffers they came from.
  std::int64_t pool_bytes = 0;
  // A pool for `budget`, leaving 1 / 2^slack_shift of it for the placement's gaps.
  static std::int64_t pool_for(std::int64_t budget, int slack_shift) { return budget - (budget >> slack_shift); }
  // The ucplan search: more residency tables to start from, the last first (exact mode's MILP
  // solution; the best plan without offload, for the branches with), and the work budget of its
  // local search (simulated steps x 10 + arena blocks looked at).
  struct Seed {
    std::string name;
    std::vector<Residency> table;
  };
  std::vector<Seed> extra_seeds;
  std::int64_t local_search_budget = 2'500'000;
  // A search abandons a candidate whose round already takes longer than this (the best found).
  std::int64_t abandon_after_ns = std::numeric_limits<std::int64_t>::max();
  // The ucplan search: may it move activations to host memory (--offload)? Without, its plans
  // only keep and recompute.
  bool offload = true;
  // Carry the batch's input that the round's first task reads across rounds (plan.h's carried
  // buffer): the round starts without waiting for its copy, which the round before makes, at the
  // cost of the slice's bytes held for the whole program, and of a copy in again for a use in the
  // backward pass (the carried buffer takes the next slice once the forward pass is done with it).
  bool carry_input = false;
  // Record, per round position, what is on the device when it starts and what it recomputes
  // (ScheduleResult::on_device_at, recomputed_at): exact mode reads a plan back as a MILP start.
  bool record_stages = false;
  // One search branch (offload as allowed, moDNN's placement) instead of all four: a quarter of
  // the work, for estimates that a full search can only improve on (the compile report's hints).
  bool quick = false;
  // make_schedule_statics for these graph and costs, shared by the simulations of a search; when
  // null, each simulation builds its own.
  std::shared_ptr<const ScheduleStatics> statics;
  // Record, per round position, the bound the branch and bound compares with abandon_after_ns
  // there and the work spent by then (ScheduleResult::bound_at, work_at): with them a search
  // knows what the same simulation against another bound returns (search.cpp, SimulationMemo).
  bool record_bounds = false;
  // The search's memo of the simulations of one branch (search.cpp); null outside a search.
  std::shared_ptr<SimulationMemo> memo;
  // Whether the result holds the plan (steps, buffers, kernels). A search's simulations, of which
  // only the best is ever written out, leave it false and simulate the winner again with it:
  // the simulation is deterministic, so that gives the same schedule, and building every step's
  // names and buffer lists for hundreds of losing candidates was a third of the search's time.
  bool record_plan = true;
};

struct ScheduleResult {
  bool ok = false;
  std::string failure;          // why not, when !ok
  std::vector<PlanStep> steps;  // round steps then final steps
  std::vector<PlanBuffer> buffers;
  std::vector<PlanHostBuffer> host_buffers;
  std::vector<PlanKernel> kernels;  // conv kernel choices in the round (first execution)
  std::int64_t round_ns = 0, final_ns = 0;
  std::int64_t arena_bytes = 0;
  // When the buffers were placed again after the simulation (offsets.h): the simulation's own
  // arena, larger than arena_bytes; 0 when the offsets are the simulation's.
  std::int64_t simulated_arena_bytes = 0;
  std::int64_t offload_bytes = 0, prefetch_bytes = 0, input_bytes = 0;
  std::int64_t recompute_ns = 0, recompute_steps = 0;
  std::vector<int> recomputations;  // per tensor: how many times it was recomputed in the round
  std::int64_t workspace_peak_bytes = 0;
  std::int64_t stall_ns = 0;  // compute waiting on copies or on freed memory
  std::int64_t work = 0;      // arena blocks looked at while evicting (the cost of simulating)
  int defragmentations = 0;
  // The ucplan search: every candidate tried, with its predicted round time, or why it failed.
  struct Candidate {
    std::string name;
    std::int64_t round_ns = 0;  // 0 when it failed
    std::string why;
  };
  std::vector<Candidate> search_log;
  int candidates_skipped = 0;  // not simulated: the search's work budget was spent
  // For the ucplan strategy's search: per tensor, what happened.
  std::vector<char> evicted_dirty;            // offloaded on demand (not planned)
  std::vector<std::int64_t> stall_by_tensor;  // compute time lost waiting for its prefetch
  // With ScheduleInput::record_stages, per round position: the non-resident tensors holding a
  // value on the device when it starts, and the tensors it recomputes (sorted).
  std::vector<std::vector<int>> on_device_at, recomputed_at;
  std::vector<int> config_at;  // and the front index of its conv configuration (-1: not a conv kernel)
  // With ScheduleInput::record_bounds, per round position simulated (up to the one where it
  // ended): the least its round can take as known there (a search abandons the simulation at the
  // first position where this exceeds its abandon_after_ns), and the work spent by then.
  std::vector<std::int64_t> bound_at, work_at;
  // The ucplan search: the placement its plan was made with (to run its table again).
  bool best_fit = false, two_ended = false;
  std::int64_t pool_bytes = 0;              // the pool it was scheduled in (ScheduleInput::pool_bytes), 0: none
  std::int64_t placement_search_nodes = 0;  // its offsets found by pack_below in this many nodes (0: best fit)
  std::int64_t placement_work = 0;          // the placement's search work (OffsetReassignment::search_work)
};

// A pool's slack for the placement's gaps (ScheduleInput::pool_for), from its branch's own
// (kPoolBranchShifts) on, tried in turn until the plan fits the budget once placed: 1/64, 1/32,
// 1/16, then 1/8 of the budget.
inline constexpr int kPoolSlackShifts[] = {6, 5, 4, 3};
// The pool branches' own slacks: one branch each, searched in the pool it leaves (1/64, 1/32).
inline constexpr int kPoolBranchShifts[] = {6, 5};

ScheduleResult simulate_schedule(const ScheduleInput& in, Strategy& strategy);

// What simulate_schedule returns when it abandons a simulation (ScheduleInput::abandon_after_ns)
// after `work`: not ok, the reason, the work, and nothing else.
ScheduleResult abandoned_schedule(std::int64_t work);

}  // namespace ucplan
