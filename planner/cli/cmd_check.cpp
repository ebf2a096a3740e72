// `ucplan check`: every plan passes the independent verifier; with --recompile it is also
// reproduced byte for byte from its embedded inputs and the profile it names (how plans are
// kept valid and up to date in CI).
#include <filesystem>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/sha256.h"
#include "planner/model/units.h"
#include "planner/passes/pipeline.h"
#include "planner/check/verify.h"

namespace ucplan {

namespace {

// First differing line, for the report.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  int line = 0;
  while (true) {
    bool ga = static_cast<bool>(std::getline(sa, la)), gb = static_cast<bool>(std::getline(sb, lb));
    ++line;
    if (!ga && !gb) return "";
    if (!ga || !gb || la != lb) {
      auto cut = [](const std::string& s) { return s.size() > 160 ? s.substr(0, 160) + "..." : s; };
      return fmt::format("line {}: file has {}, recompiled has {}", line, ga ? "'" + cut(la) + "'" : "nothing",
                         gb ? "'" + cut(lb) + "'" : "nothing");
    }
  }
}

// One plan: 0 valid (and reproduced, with --recompile), 1 not. Throws UserError on a file that
// is not a plan, or whose profile is.
int check_one(const CheckOptions& o, const std::string& path) {
  const Plan plan = load_plan(path);
  std::string error = find_plan_error(plan);
  if (!error.empty()) {
    fmt::print("FAIL {}: {}\n", path, error);
    return 1;
  }
  bool same_content = false;  // --recompile: the same plan in other bytes
  if (o.recompile) {
    const std::string text = read_file_bytes(path);
    // The profile as the plan names it: from the plan's own folder (compile records it so), else
    // from the current folder (plans made before it did), else by its name beside the plan (a plan
    // moved with its profile). The first of those whose bytes are the plan's profile_sha256 is
    // used. A plan whose profile is not there fails alone; the others are still checked.
    namespace fs = std::filesystem;
    const fs::path recorded = plan.profile_path, folder = fs::path(path).parent_path();
    std::error_code canonical_error;
    const fs::path real_folder =
        fs::weakly_canonical(fs::absolute(path, canonical_error), canonical_error).parent_path();
    std::vector<fs::path> places;  // the plan's folder as named, then as its links resolve
    for (const fs::path& f : {folder, real_folder})
      if (recorded.is_relative()) places.push_back(f / recorded);
    places.push_back(recorded);
    for (const fs::path& f : {folder, real_folder}) places.push_back(f / recorded.filename());
    std::string profile_path, changed;
    for (const fs::path& at : places) {
      std::error_code ec;
      if (!fs::is_regular_file(at, ec)) continue;
      if (sha256_hex(read_file_bytes(at.string())) == plan.profile_sha256) {
        profile_path = at.string();
        break;
      }
      if (changed.empty()) changed = at.string();
    }
    if (profile_path.empty()) {
      if (!changed.empty())
        fmt::print("FAIL {}: profile {} has changed since the plan was made (sha256 differs)\n", path, changed);
      else
        fmt::print(
            "FAIL {}: inputs.profile: {} is not there from the plan's folder nor from the current folder, and {} is "
            "not beside the plan, so the plan cannot be made again\n",
            path, plan.profile_path, recorded.filename().string());
      return 1;
    }
    CompileInput in;
    in.network = plan.network;
    in.network_file = path + " (embedded network)";
    in.profile = load_profile(profile_path);
    in.profile_path = profile_path;
    in.profile_in_plan = plan.profile_path;
    in.profile_sha256 = plan.profile_sha256;
    in.batch = plan.batch;
    in.budget_bytes = plan.budget_bytes;
    in.precision = plan.precision;
    // The options as the plan records them, parsed as the command line's are.
    in.options = parse_plan_options(
        {plan.strategy, plan.sub_batch_option, plan.workspace_option, plan.micro_batches, plan.solver,
         plan.solver_time_limit_ms > 0 ? fmt::format("{}ms", plan.solver_time_limit_ms) : std::string(), plan.offload,
         plan.loss_scale, ""});
    const std::string again = plan_to_json_text(make_plan(in).plan);
    // A plan reformatted by another tool (indented, keys reordered) is the same plan: its content
    // is compared where its bytes differ.
    if (again != text) same_content = Json::parse(text, nullptr, false) == Json::parse(again, nullptr, false);
    if (again != text && !same_content) {
      // Exact mode under a time limit: a MILP stopped at the limit returns CBC's incumbent of that
      // moment, which depends on the machine's speed and load (the plan's notes say so).
      const bool timed = plan.solver == "exact" && plan.solver_time_limit_ms > 0;
      // In a file formatted otherwise, the first difference of content is shown in ucplan's format.
      const std::string as_ucplan_writes = plan_to_json_text(plan);
      const bool reformatted = as_ucplan_writes != text &&
                               Json::parse(as_ucplan_writes, nullptr, false) == Json::parse(text, nullptr, false);
      fmt::print("FAIL {}: recompiling gives a different plan ({}){}\n", path,
                 first_difference(reformatted ? as_ucplan_writes : text, again),
                 timed ? "; it was made by exact mode under --time-limit, whose MILPs return what CBC has found "
                         "when the limit strikes, which depends on the machine's speed and load"
                       : "");
      return 1;
    }
  }
  fmt::print("ok   {}: {} steps, {} predicted ({}), peak {} of {}{}\n", path, plan.steps.size(),
             format_ns(plan.summary.predicted_ns), plan.profile_source, format_bytes(plan.summary.peak_bytes),
             format_bytes(plan.budget_bytes),
             !o.recompile   ? ""
             : same_content ? ", reproduced (the same content, formatted otherwise than ucplan writes it)"
                            : ", reproduced byte for byte");
  return 0;
}

}  // namespace

// Every plan is checked, also after one that cannot be read (said on stderr as any bad input,
// then the next): exit 2 if any could not be read, else 1 if any failed.
int run_check(const CheckOptions& o) {
  std::size_t failures = 0, unreadable = 0;
  for (const auto& path : o.plans) {
    try {
      failures += static_cast<std::size_t>(check_one(o, path));
    } catch (const UserError& e) {
      std::fflush(stdout);  // in order with the lines before it, when both go to one terminal or file
      std::fprintf(stderr, "ucplan: error: %s\n", e.what());
      ++unreadable;
    }
  }
  if (o.plans.size() > 1)
    fmt::print("{} of {} plans valid{}\n", o.plans.size() - failures - unreadable, o.plans.size(),
               unreadable ? fmt::format(" ({} not read)", unreadable) : "");
  return unreadable ? 2 : failures ? 1 : 0;
}

}  // namespace ucplan
