// make_plan(): the planner as a straight list of stages (STYLE.md #2), one table in pipeline.cpp
// (kStages) in execution order:
//   graph (graph, route, tasks) -> liveness -> lower-bound -> conv-configs (costs and conv
//   Pareto fronts at every sub-batch; candidates, Eq. 3) -> sub-batch (per candidate: workspace
//   policy dynamic | WR | WD, schedule by the strategy; the fastest wins) -> schedule (the plan)
//   -> verify.
// The options are checked once, before the first stage. `dump_after` names a stage whose JSON is
// returned in CompileResult::dump (the same names, dump_stage_names()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/network.h"
#include "planner/model/plan.h"
#include "planner/model/profile.h"
#include "remat_milp.h"
#include "schedule.h"

namespace ucplan {

struct CompileInput {
  Network network;
  std::string network_file;
  Profile profile;
  std::string profile_path;
  std::string profile_sha256;
  std::int64_t batch = 0;  // 0: the profile's
  std::int64_t budget_bytes = 0;
  std::string strategy = "ucplan";
  std::string sub_batch = "auto";
  std::string workspace = "dynamic";
  std::string micro_batches = "all";  // all | powerOfTwo | undivided (mu-cuDNN §III-B policies)
  std::string dump_after;             // "" or a stage name (see dump_stage_names())
  std::string solver = "default";     // default | exact (ucplan strategy only)
  double solver_time_limit_s = 0;     // exact: CBC's wall-clock limit, 0 for none
  std::string offload = "allowed";    // allowed | never (the ucplan strategy only)
  bool quick = false;                 // one search branch instead of all (ScheduleInput::quick): for hints
  // --precision: must be the profile's (a profile is measured at one precision).
  Precision precision = Precision::FP32;
  std::string loss_scale;  // "" for the precision's default (precision.h)
};

struct CandidateOutcome {
  std::int64_t sub_batch = 0;
  bool ok = false;
  std::string why;                                // when not ok
  std::int64_t predicted_ns = 0;                  // rounds * round + final
  std::vector<ScheduleResult::Candidate> search;  // ucplan: candidates, predicted round times or why not
  bool milp = false;                              // exact mode ran the MILP for this sub-batch
  RematMilpResult milp_result;
};

struct CompileResult {
  Plan plan;
  std::vector<CandidateOutcome> candidates;  // every sub-batch size tried, for the report
  std::string dump;                          // JSON text of the stage asked for, if any
};

std::vector<std::string> dump_stage_names();

// Throws UserError on bad options, a budget below the bound, or no strategy result that fits.
CompileResult make_plan(const CompileInput& in);

// Parses --workspace: "dynamic", "wr:SIZE" or "wd:SIZE" (SIZE with a unit). Throws UserError.
struct WorkspaceOption {
  enum class Kind { Dynamic, WR, WD } kind = Kind::Dynamic;
  std::int64_t bytes = 0;
};
WorkspaceOption parse_workspace_option(const std::string& text);

}  // namespace ucplan
