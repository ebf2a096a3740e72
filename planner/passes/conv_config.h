// Convolution configuration optimiser, mu-cuDNN §III (Oyama et al., "Accelerating Deep Learning
// Frameworks with Micro-batches"). A kernel's mini-batch B may run as several micro-batches one
// after another, each with its own algorithm; a configuration is that list (§III-A). Its time is
// the sum over micro-batches and its workspace the max (they share one workspace in turn).
//
//   pareto_front   the DP of §III-C: D(C(B)), every non-dominated (time, workspace) configuration
//   fastest_within WR (§III-B) answered from a front: fastest configuration within a limit
//   wr_optimal     the T(b) recurrence of §III-B computed directly (a cross-check of the above)
//   solve_wd       WD (§III-C, Eqs. 1-4): one configuration per kernel, minimum total time, with
//                  the SUM of workspaces within a total (each kernel owns a segment); 0-1 ILP, CBC
//
// Times are integer nanoseconds and workspaces integer bytes, so sums are exact and results are
// identical run to run. Ties are broken the same way everywhere (see pareto_front).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ucplan {

// One way to run a kernel on one micro-batch, from the profile. Each (algo, micro_batch) pair
// appears at most once in an option list; times and workspaces are >= 0.
struct MicroOption {
  std::string algo;
  std::int64_t micro_batch = 0;
  std::int64_t time_ns = 0;
  std::int64_t workspace_bytes = 0;
};

struct MicroConfig {
  std::string algo;
  std::int64_t micro_batch = 0;
  bool operator==(const MicroConfig&) const = default;
};

// A configuration (mu-cuDNN §III-A). `micro` is in canonical order: micro-batch size descending,
// then algorithm name ascending; permutations of it are the same configuration.
struct ConvConfig {
  std::vector<MicroConfig> micro;
  std::int64_t time_ns = 0;          // sum over micro-batches
  std::int64_t workspace_bytes = 0;  // max over micro-batches
  bool operator==(const ConvConfig&) const = default;
};

// D(C(B)) of §III-C: all non-dominated configurations for batch B, sorted by workspace ascending
// (hence time strictly descending). Options with micro_batch > B are ignored; empty if B cannot
// be composed from the remaining sizes. Cost about B x |options| x |front| steps (B = 256, all
// sizes, 8 algorithms: 7-25 ms).
// Tie-break (exact, not heuristic): among configurations with equal time and workspace the front
// holds the one with the fewest micro-batches, then the lexicographically smallest canonical
// list (elements compared by micro-batch descending, then algorithm name ascending).
std::vector<ConvConfig> pareto_front(const std::vector<MicroOption>& options, std::int64_t batch);

// WR (§III-B) over a front: the fastest configuration whose workspace <= limit (nullopt if none).
// This is also the step-wise query of a one-stream schedule ("fastest configuration that fits in
// what is free now"). Works on any list; ties: smaller workspace, then earlier in the list.
std::optional<ConvConfig> fastest_within(const std::vector<ConvConfig>& front, std::int64_t workspace_limit);

// The T(b) DP of §III-B, computed directly from the options whose workspace <= limit (not via
// the front), to cross-check fastest_within. Ties: fewest micro-batches, then canonical list
// (so it may pick a larger workspace than fastest_within when two configurations tie in time).
std::optional<ConvConfig> wr_optimal(const std::vector<MicroOption>& options, std::int64_t batch,
                                     std::int64_t workspace_limit);

// WD (§III-C, Eqs. 1-4): choice[k] indexes fronts[k] (any lists; dominated entries are never
// chosen); time_ns and workspace_bytes are the exact integer sums of the chosen configurations,
// and workspace_bytes <= total_workspace always holds. nullopt when no choice fits (or a kernel
// has no configuration). `optimal`: proven optimal at byte precision; otherwise lower_bound_ns
// is a proven bound on the optimal time (seen: within 1e-5 relative). CBC sees the workspace
// row in units of workspace_unit bytes (a power of two; the .cpp says why and how exactness is
// kept). Identical kernels (equal lists) are aggregated, so repeated layers cost nothing extra.
struct WdSolution {
  std::vector<int> choice;
  std::int64_t time_ns = 0;
  std::int64_t workspace_bytes = 0;
  bool optimal = false;
  std::int64_t lower_bound_ns = 0;  // == time_ns when optimal
  int ilp_solves = 0;               // CBC runs (0: no ILP needed after the reduction)
  std::int64_t workspace_unit = 1;  // bytes per unit of the ILP's workspace row
};
std::optional<WdSolution> solve_wd(const std::vector<std::vector<ConvConfig>>& fronts, std::int64_t total_workspace);

// Independent checker (STYLE #5): "" when `config` covers exactly `batch` samples, every
// micro-configuration is one of `options`, the list is in canonical order and time/workspace are
// the sum/max of its options; otherwise what is wrong.
std::string find_config_error(const std::vector<MicroOption>& options, std::int64_t batch, const ConvConfig& config);

}  // namespace ucplan
