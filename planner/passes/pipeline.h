// make_plan(): the planner as a straight list of stages (STYLE.md #2), one table in pipeline.cpp
// (kStages) in execution order:
//   graph (graph, route, tasks) -> liveness -> lower-bound -> conv-configs (costs and conv
//   Pareto fronts at every sub-batch; candidates, Eq. 3) -> sub-batch (per candidate: workspace
//   policy dynamic | WR | WD, schedule by the strategy; the fastest wins) -> schedule (the plan)
//   -> verify.
// The options arrive typed (PlanOptions, parsed once by the caller); what they must agree with in
// the profile (its precision, its sizes) is checked before the first stage or by the stage that
// uses it. `dump_after` names a stage whose JSON is returned in CompileResult::dump; with
// CompileInput::stop_after_dump the stages after it do not run (the result then has no plan).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/model/network.h"
#include "planner/model/plan.h"
#include "planner/model/profile.h"
#include "conv_config.h"
#include "remat_milp.h"
#include "schedule.h"
#include "sub_batch.h"

namespace ucplan {

// --workspace: dynamic, wr:SIZE or wd:SIZE (mu-cuDNN §III-C).
struct WorkspaceOption {
  enum class Kind { Dynamic, WR, WD } kind = Kind::Dynamic;
  std::int64_t bytes = 0;
  std::string text = "dynamic";  // as given: the plan records it
};
WorkspaceOption parse_workspace_option(const std::string& text);  // throws UserError

// --solver: how hard the ucplan strategy searches (the plan records solver_name()).
//   fast      one search branch, once
//   default   every branch; for networks under kReferenceLayers twice, then a third time with ten
//             times the local-search work led by the best plan without offload (schedule_default)
//   thorough  the default with that third search whatever the network's size
//   exact     thorough, then the rematerialisation MILP, whose solution leads another longer search
enum class Solver { Fast, Default, Thorough, Exact };
const char* solver_name(Solver s);

// The options of a compile, typed. The CLI parses the command line into them once
// (parse_plan_options), `check --recompile` a plan's record of them; the stages read only these.
struct PlanOptions {
  std::string strategy = "ucplan";  // one of strategy_names()
  SubBatchOption sub_batch;         // sub_batch.h
  WorkspaceOption workspace;
  SizesPolicy micro_batches = SizesPolicy::All;  // the sizes conv kernels may split into (mu-cuDNN §III-B)
  Solver solver = Solver::Default;               // not Default: the ucplan strategy only
  double time_limit_s = 0;                       // exact: the limit of all its MILPs together, 0: none
  bool offload = true;                           // --offload allowed (never: the ucplan strategy only)
  std::string loss_scale;                        // "" for the precision's default (precision.h)
  std::string dump_after;                        // "" or one of dump_stage_names()
  bool quick = false;      // one search branch whatever the solver (tests: exact mode's bound alone, quickly)
  double search_work = 1;  // the share of the local search's work budget (the compile report's estimates: less)
};

// The same options as text: the command line's, or a plan's record of them (plan.h).
struct PlanOptionText {
  std::string strategy = "ucplan", sub_batch = "auto", workspace = "dynamic", micro_batches = "all", solver = "default",
              time_limit, offload = "allowed", loss_scale, dump_after;
};
// Throws UserError naming the option that is wrong.
PlanOptions parse_plan_options(const PlanOptionText& text);

struct CompileInput {
  Network network;
  std::string network_file;
  Profile profile;
  std::string profile_path;     // as given, for messages
  std::string profile_in_plan;  // as the plan records it (path_from_output); profile_path if empty
  std::string profile_sha256;
  std::int64_t batch = 0;  // 0: the profile's
  std::int64_t budget_bytes = 0;
  // --precision: must be the profile's (a profile is measured at one precision).
  Precision precision = Precision::FP32;
  PlanOptions options;
  // Exact mode, per sub-batch: a proven lower bound on a recompute-only round from an earlier MILP
  // at a larger budget (a plan made again with less memory, cmd_compile): it holds here too (less
  // memory is never faster), so the plan reports the stronger of it and this compile's own.
  std::map<std::int64_t, std::int64_t> milp_bounds;
  // Exact mode: the seconds earlier MILPs of the same compile took (a plan made again): they count
  // against options.time_limit_s, which is the whole compile's.
  double milp_seconds = 0;
  // When no plan is found (make_plan throws UserError) and this is set, it receives every sub-batch
  // candidate tried, with its search log: why each table failed (compile -v).
  std::vector<struct CandidateOutcome>* failed_candidates = nullptr;
  // Only options.dump_after's JSON is wanted (compile --dump-after without -o or --trace): make_plan
  // returns after that stage, without the search of the later ones, and with no plan.
  bool stop_after_dump = false;
  // When set, told before each long step (a candidate's search, exact mode's MILPs) what it is:
  // compile's progress line on a terminal. Called from the compiling thread only.
  std::function<void(const std::string&)> progress;
};

struct CandidateOutcome {
  std::int64_t sub_batch = 0;
  bool ok = false;
  std::string why;                                // when not ok
  std::int64_t predicted_ns = 0;                  // rounds * round + final
  std::vector<ScheduleResult::Candidate> search;  // ucplan: candidates, predicted round times or why not
  bool milp = false;                              // exact mode ran the MILP for this sub-batch
  RematMilpResult milp_result;                    // recompute-only: its solution leads the seeds
  RematMilpResult milp_offload;                   // with offload allowed: the MILP that models copies too
  double milp_seconds = 0;                        // their wall clock (side by side: the longer one's)
  std::optional<WdSolution> wd_unproven;          // --workspace wd: a choice not proven the fastest
  // The MILPs exact mode solved for this sub-batch (none, the recompute-only one, or both).
  std::vector<const RematMilpResult*> milps() const {
    if (!milp) return {};
    if (!milp_offload.offload) return {&milp_result};
    return {&milp_result, &milp_offload};
  }
};

struct CompileResult {
  Plan plan;
  std::vector<CandidateOutcome> candidates;  // every sub-batch size tried, for the report
  std::string dump;                          // JSON text of the stage asked for, if any
};

std::vector<std::string> dump_stage_names();

// Throws UserError on bad options, a budget below the bound, or no strategy result that fits.
CompileResult make_plan(const CompileInput& in);

}  // namespace ucplan
