// The strategies the schedule engine (schedule.h) runs: the baselines as their papers describe
// them (vDNN, SuperNeurons, Chen et al.'s sqrt(N) checkpoints, everything kept), a strategy given
// by a per-tensor residency table (what the ucplan search, search.h, builds), and a per-stage plan
// (exact mode's MILP, remat_milp.h). A strategy is policy only: the mechanism (prefetch,
// eviction, placement) is the engine's, the same for every strategy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "schedule.h"

namespace ucplan {

// The strategies of the same scheduler (names as on the command line).
std::vector<std::string> strategy_names();
// keep-all, vdnn-all, vdnn-conv, superneurons, checkpoint-sqrt, each as its paper describes it;
// under --workspace wr:/wd: the configurations come from ScheduleInput::fixed_config instead.
std::unique_ptr<Strategy> make_baseline_strategy(const std::string& name, const Graph& g, const TaskGraph& tg,
                                                 const CostTable& costs);
// A strategy given by an explicit per-tensor table (the ucplan search builds these).
std::unique_ptr<Strategy> make_table_strategy(std::string name, std::vector<Residency> table, PrefetchMode prefetch,
                                              bool evict_on_demand, bool by_gain, bool may_offload = true);

// A per-stage plan: per round position, the tensors planned for recomputation that stay on the
// device into it (Checkmate's S[t, i]); a tensor recomputed anywhere is Recompute in `table` (a
// Hold there is run as Recompute: the flags say what stays).
struct StagedPlan {
  std::vector<Residency> table;
  std::vector<std::vector<char>> keep;  // [position][tensor]
  bool holds = false;                   // the table's Holds stay Holds (else Recomputes)
};
// Runs a staged plan with moDNN's mechanisms (Eq. 4 prefetch, Eq. 5 gain); on-demand offload
// only if `may_offload`.
ScheduleResult simulate_staged(const ScheduleInput& in, const StagedPlan& plan, bool may_offload);

// The residency table of a baseline (names as strategy_names()), also a seed of the search.
std::vector<Residency> baseline_table(const std::string& name, const Graph& g, const TaskGraph& tg);
// Tensors read by some backward task: the only ones worth offloading or recomputing.
std::vector<char> backward_needed(const TaskGraph& tg);
// Whether tensor t may be dropped and recomputed: an activation, but not the input's, a host
// input or the loss's.
bool recomputable(const Graph& g, const TaskGraph& tg, int t);
// Chen et al. 2016's checkpoints, per tensor: 1 where a segment boundary is kept, every
// stride-th articulation point (stride 0: about every sqrt(N)-th).
std::vector<char> sqrt_checkpoints(const Graph& g, const TaskGraph& tg, int stride = 0);
// Turns back to Keep every Recompute whose recomputation would reach back through more than a
// bounded number of recomputed layers (a residual stream would otherwise be one segment).
void bound_segments(const Graph& g, const TaskGraph& tg, std::vector<Residency>& table);
// Recomputing y re-runs its layer, which reads the layer's inputs again then. An input that no
// backward task reads (`need`: backward_needed(); a batch norm's output under its ReLU, an add's)
// and that is kept would stay on the device only for that recomputation, so dropping y would
// free nothing: such inputs of each of `from` become Recompute too, and theirs in turn. Kept or
// needed inputs are left as they are.
void recompute_unneeded_inputs(const Graph& g, const TaskGraph& tg, const std::vector<char>& need,
                               std::vector<Residency>& table, std::vector<int> from);

}  // namespace ucplan
