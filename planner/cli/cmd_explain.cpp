// `ucplan explain`: what a plan does and what it predicts, for a reader.
#include <fmt/format.h>

#include "commands.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/views/plan_views.h"
#include "planner/model/units.h"
#include "planner/check/verify.h"
#include "report.h"

namespace ucplan {

int run_explain(const ExplainOptions& o) {
  check_outputs({{"--trace", o.trace}, {"--svg", o.svg}}, {{"the plan", o.plan}});
  const Plan p = load_plan(o.plan);
  const std::string error = find_plan_error(p);
  // The views (the trace, the SVG, the summary's memory and the per-layer table) read steps and
  // buffers by the indices the plan gives: only a valid plan has them in range.
  const bool valid = error.empty();
  std::vector<std::pair<std::string, std::string>> outputs;
  if (valid && !o.trace.empty()) outputs.emplace_back(o.trace, chrome_trace(p));
  if (valid && !o.svg.empty()) outputs.emplace_back(o.svg, memory_svg(p));
  write_files_atomically(outputs);
  for (const std::string& path : {o.trace, o.svg})
    if (!valid && !path.empty()) fmt::print(stderr, "{}: not written: an invalid plan has no timeline to draw\n", path);
  if (o.json) {
    const PlanSummary& s = p.summary;
    OrderedJson j = {
        {"plan", o.plan},
        {"valid", valid},
        {"error", error},
        {"network", p.network.name},
        {"profile_source", p.profile_source},
        {"strategy", p.strategy},
        {"batch", p.batch},
        {"sub_batch", p.sub_batch},
        {"rounds", p.rounds},
        {"budget_bytes", p.budget_bytes},
        {"predicted_ns", s.predicted_ns},
        {"ideal_ns", s.ideal_ns},
        {"overhead",
         s.ideal_ns ? static_cast<double>(s.predicted_ns - s.ideal_ns) / static_cast<double>(s.ideal_ns) : 0.0},
        {"peak_bytes", s.peak_bytes},
        // The arena less its gaps: the most bytes in use at once (read from a valid plan only).
        {"in_use_peak_bytes", valid ? max_bytes_in_use(p) : 0},
        {"lower_bound_bytes", s.lower_bound_bytes},
        {"offload_bytes", s.offload_bytes},
        {"prefetch_bytes", s.prefetch_bytes},
        {"recompute_ns", s.recompute_ns}};
    fmt::print("{}", dump_json(j));
    return valid ? 0 : 1;
  }
  if (!valid) {
    fmt::print("{}: {} b{}, strategy {}\n  verifier      INVALID: {}\n", o.plan, p.network.name, p.batch, p.strategy,
               error);
    return 1;
  }
  fmt::print("{}", plan_summary(p));
  fmt::print("  verifier      valid\n\n");
  fmt::print("Per layer (one round):\n{}", plan_decisions(p));
  if (!o.trace.empty()) fmt::print("\npredicted timeline written to {} (open in https://ui.perfetto.dev)\n", o.trace);
  if (!o.svg.empty()) fmt::print("memory plot written to {}\n", o.svg);
  return 0;
}

}  // namespace ucplan
