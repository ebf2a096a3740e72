// `ucplan frontier`: the budget -> predicted-time curve of a network on a profile, from the moDNN
// lower bound to the peak of keeping everything, so a user sees the knee ("what budget keeps me
// within 5 % of the ideal?"). Each point is a full `compile` at that budget. A plan that fits a
// smaller budget also fits every larger one, so the curve reported is the monotone envelope: at
// each budget the fastest plan found at it or at any smaller budget, and the table says when a
// smaller budget's plan is the one that holds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "progress_line.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/network.h"
#include "planner/views/plan_views.h"
#include "planner/model/profile.h"
#include "planner/model/sha256.h"
#include "planner/model/units.h"
#include "planner/passes/parallel.h"
#include "planner/passes/pipeline.h"

namespace ucplan {

namespace {

struct Point {
  std::int64_t budget = 0;
  bool ok = false;
  std::string why;
  std::int64_t predicted_ns = 0, ideal_ns = 0, peak_bytes = 0, recompute_ns = 0, offload_bytes = 0;
  std::int64_t sub_batch = 0;
  int held_by = -1;  // envelope: the point whose plan holds here (itself, or a smaller budget's)
};

double overhead(const Point& p) { return static_cast<double>(p.predicted_ns) / static_cast<double>(p.ideal_ns) - 1.0; }

// Overhead (%) over budget, one polyline for the envelope and dots for every point computed.
std::string frontier_svg(const std::string& title, const std::vector<Point>& pts) {
  const double w = 720, h = 400, left = 70, right = 20, top = 40, bottom = 50;
  double ymax = 1.0;
  for (const Point& p : pts)
    if (p.ok) ymax = std::max(ymax, 100 * overhead(p));
  ymax = std::ceil(ymax / 5) * 5;
  const double x0 = std::log(static_cast<double>(pts.front().budget)),
               x1 = std::log(static_cast<double>(pts.back().budget));
  auto X = [&](std::int64_t b) {
    return left + (w - left - right) * (x1 > x0 ? (std::log(static_cast<double>(b)) - x0) / (x1 - x0) : 0.5);
  };
  auto Y = [&](double pct) { return top + (h - top - bottom) * (1 - pct / ymax); };
  std::string s = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)", w,
      h);
  s += fmt::format("\n<text x=\"{}\" y=\"20\" font-size=\"14\">{}</text>", left, xml_escape(title));
  s += fmt::format("\n<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>", left, h - bottom,
                   w - right);
  s += fmt::format("\n<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>", left, top, h - bottom);
  for (int k = 0; k <= 5; ++k) {
    const double pct = ymax * k / 5;
    s += fmt::format("\n<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">+{:.0f} %</text>", left - 6, Y(pct) + 4, pct);
    s += fmt::format("\n<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>", left, Y(pct),
                     w - right);
  }
  for (std::size_t i = 0; i < pts.size(); i += std::max<std::size_t>(1, pts.size() / 6))
    s += fmt::format("\n<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>", X(pts[i].budget),
                     h - bottom + 18, xml_escape(format_bytes(pts[i].budget)));
  s += fmt::format("\n<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">budget (log scale)</text>", (left + w - right) / 2,
                   h - 10);
  std::string line;
  for (const Point& p : pts) {
    if (p.held_by < 0) continue;
    line += fmt::format("{:.1f},{:.1f} ", X(p.budget), Y(100 * overhead(pts[p.held_by])));
  }
  s += fmt::format("\n<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/>", line);
  for (const Point& p : pts)
    if (p.ok)
      s += fmt::format("\n<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#1f77b4\"/>", X(p.budget),
                       Y(100 * overhead(p)));
  s += "\n</svg>\n";
  return s;
}

}  // namespace

int run_frontier(const FrontierOptions& o) {
  if (o.points < 2 || o.points > 200)
    throw UserError("", "--points", fmt::format("{} is out of range (2 to 200)", o.points));
  PlanOptionText text;
  text.strategy = o.strategy;
  text.sub_batch = o.sub_batch;
  text.solver = o.solver;
  const PlanOptions options = parse_plan_options(text);
  if (options.solver == Solver::Exact)
    throw UserError("", "--solver", "exact is not offered here (a MILP per budget); use fast, default or thorough");
  const std::string net_path = resolve_network_path(o.network);
  // The SVG is checked before the budgets are compiled, so that a bad path costs no work.
  check_outputs({{"--svg", o.svg}}, {{"the network", net_path}, {"the profile (--profile)", o.profile}});
  CompileInput in;
  in.network = load_network(net_path);
  in.network_file = net_path;
  in.profile = load_profile(o.profile);
  in.profile_path = o.profile;
  in.profile_sha256 = sha256_hex(read_file_bytes(o.profile));
  in.precision = in.profile.precision;  // the frontier of the profile's precision
  in.batch = o.batch;
  in.options = options;

  ProgressLine line;  // on a terminal: which budget is being compiled, and for how long
  // The ends: the peak of keeping everything, and the lower bound every plan reports.
  line.show("the keep-all peak");
  in.budget_bytes = std::int64_t{1} << 50;
  CompileInput keep = in;
  keep.options.strategy = "keep-all";
  keep.options.solver = Solver::Default;
  const Plan top = make_plan(keep).plan;
  // With unlimited memory, this strategy's plan: where even it is over a threshold, the frontier
  // says by how much and how long its first layer waits for the batch's copy. Not the keep-all
  // plan's: the search may carry the batch's input across rounds (plan.h), which keep-all does not,
  // so it may need more than the keep-all peak; the curve then goes on to its peak, where more
  // memory stops helping.
  line.show("the plan with unlimited memory");
  const Plan unlimited_plan = o.strategy == "keep-all" ? top : make_plan(in).plan;
  const std::int64_t hi = std::max(top.summary.peak_bytes, unlimited_plan.summary.peak_bytes);
  const std::string hi_is =
      hi == top.summary.peak_bytes ? "the keep-all peak" : "the peak of the plan with unlimited memory";
  // The lower end: moDNN's bound, or, where no plan exists there (a batch-norm network is not
  // split into sub-batches unless asked, a baseline may not fit), the smallest budget that has
  // one, found by bisection in log space to within 1 %.
  std::int64_t lo = top.summary.lower_bound_bytes;
  auto fits = [&](std::int64_t budget) {
    line.show(fmt::format("the smallest budget with a plan: trying {}", format_bytes(budget)));
    CompileInput at = in;
    at.budget_bytes = budget;
    try {
      make_plan(at);
      return true;
    } catch (const UserError&) {
      return false;
    }
  };
  if (!fits(lo)) {
    std::int64_t bad = lo, good = hi;
    while (static_cast<double>(good) > 1.01 * static_cast<double>(bad)) {
      const auto mid = static_cast<std::int64_t>(std::sqrt(static_cast<double>(bad) * static_cast<double>(good)));
      (fits(mid) ? good : bad) = mid;
    }
    lo = good;
  }
  std::vector<Point> pts;
  for (int i = 0; i < o.points; ++i) {
    Point p;
    const double f = static_cast<double>(i) / (o.points - 1);
    p.budget = static_cast<std::int64_t>(
        std::ceil(std::exp(std::log(static_cast<double>(lo)) * (1 - f) + std::log(static_cast<double>(hi)) * f)));
    if (i == 0) p.budget = lo;  // exp(log(lo)) may round up past it
    if (i == o.points - 1) p.budget = hi;
    pts.push_back(p);
  }
  line.clear();
  const BytesApart ends = format_bytes_apart(lo, hi);
  if (!o.json)
    fmt::print("{}: batch {}, strategy {}{}, {} budgets from {} ({}) to {} {}\n", in.network.name, top.batch,
               o.strategy, o.strategy == "ucplan" ? fmt::format(" (solver {})", o.solver) : "", o.points, ends.first,
               lo == top.summary.lower_bound_bytes ? "the moDNN lower bound" : "the smallest with a plan, within 1 %",
               hi_is, ends.second);
  if (!o.json)
    fmt::print("  {:>12}  {:>12}  {:>10}  {:>10}  {:>12}  {}\n", "budget", "predicted", "overhead", "recompute",
               "offload", "plan");
  // The points are independent compiles (each deterministic): they run side by side, on as many
  // threads as there are cores (each compile's own search shares them), and each row is printed
  // once it and every row before it are done, so the table, the envelope and the JSON are what
  // compiling one budget after the other gives.
  std::mutex mutex;  // guards pts, done, running, best, printed, stdout and the progress line
  std::vector<char> done(pts.size(), 0);
  std::size_t printed = 0;
  int best = -1;
  auto print_ready = [&] {  // mutex held
    for (; printed < pts.size() && done[printed]; ++printed) {
      Point& p = pts[printed];
      // A plan as fast as the envelope's is shown as itself (its own offload and recomputation).
      if (p.ok && (best < 0 || p.predicted_ns <= pts[best].predicted_ns)) best = static_cast<int>(printed);
      p.held_by = best;
      if (o.json) continue;
      line.clear();
      // A budget as its neighbours would print it ("1.50 MiB" three times, 512 B apart) in bytes.
      auto alike = [&](std::size_t k) {
        return k < pts.size() && k != printed && format_bytes(pts[k].budget) == format_bytes(p.budget);
      };
      const std::string budget = alike(printed - 1) || alike(printed + 1)
                                     ? fmt::format("{} B", with_thousands(p.budget))
                                     : format_bytes(p.budget);
      if (best < 0) {
        fmt::print("  {:>12}  no plan: {}\n", budget, p.why);
      } else {
        const Point& q = pts[best];
        fmt::print("  {:>12}  {:>12}  {:>10}  {:>10}  {:>12}  {}\n", budget, format_ns(q.predicted_ns),
                   format_percent(overhead(q)), format_ns(q.recompute_ns), format_bytes(q.offload_bytes),
                   best == static_cast<int>(printed) ? fmt::format("sub-batch {}", q.sub_batch)
                                                     : fmt::format("the plan at {} (faster)", format_bytes(q.budget)));
      }
      std::fflush(stdout);
    }
  };
  std::vector<char> running(pts.size(), 0);
  auto show = [&](std::size_t i) {  // mutex held: budget i, being compiled, on the progress line
    const auto side_by_side = std::count(running.begin(), running.end(), 1);
    line.show(fmt::format("budget {} of {}: {}{}", i + 1, pts.size(), format_bytes(pts[i].budget),
                          side_by_side > 1 ? fmt::format(" ({} side by side)", side_by_side) : ""));
  };
  parallel_for(pts.size(), [&](std::size_t i) {
    Point p;
    {
      std::lock_guard<std::mutex> lock(mutex);
      running[i] = 1;
      show(i);
      p = pts[i];
    }
    CompileInput at = in;
    at.budget_bytes = p.budget;
    try {
      const Plan plan = make_plan(at).plan;
      p.ok = true;
      p.predicted_ns = plan.summary.predicted_ns;
      p.ideal_ns = plan.summary.ideal_ns;
      p.peak_bytes = plan.summary.peak_bytes;
      p.recompute_ns = plan.summary.recompute_ns;
      p.offload_bytes = plan.summary.offload_bytes;
      p.sub_batch = plan.sub_batch;
    } catch (const UserError& e) {
      p.why = e.what();
    }
    std::lock_guard<std::mutex> lock(mutex);
    pts[i] = std::move(p);
    done[i] = 1;
    running[i] = 0;
    print_ready();
    const auto still = std::find(running.begin(), running.end(), 1);
    if (still != running.end()) show(static_cast<std::size_t>(still - running.begin()));
  });
  line.done();
  // The knee: the smallest budget whose envelope is within each threshold.
  std::vector<std::pair<double, std::optional<std::int64_t>>> knees;
  for (double t : {0.01, 0.05, 0.10, 0.25}) {
    std::optional<std::int64_t> at;
    for (const Point& p : pts)
      if (p.held_by >= 0 && overhead(pts[p.held_by]) <= t) {
        at = p.budget;
        break;
      }
    knees.push_back({t, at});
  }
  if (o.json) {
    nlohmann::ordered_json j;
    j["network"] = in.network.name;
    j["batch"] = top.batch;
    j["strategy"] = o.strategy;
    j["solver"] = solver_name(options.solver);
    j["lower_bound_bytes"] = top.summary.lower_bound_bytes;  // moDNN's, as a plan's summary states it
    j["smallest_budget_bytes"] = lo;                         // the first point: the bound, or the smallest with a plan
    j["keep_all_peak_bytes"] = top.summary.peak_bytes;
    j["unlimited_memory_peak_bytes"] = unlimited_plan.summary.peak_bytes;
    j["largest_budget_bytes"] = hi;  // the last point: the larger of the two peaks
    j["ideal_ns"] = top.summary.ideal_ns;
    j["unlimited_memory_ns"] = unlimited_plan.summary.predicted_ns;  // this strategy's, without a budget
    j["points"] = nlohmann::ordered_json::array();
    for (const Point& p : pts) {
      nlohmann::ordered_json q;
      q["budget_bytes"] = p.budget;
      q["ok"] = p.ok;
      if (p.ok) {
        q["predicted_ns"] = p.predicted_ns;
        q["overhead"] = overhead(p);
        q["peak_bytes"] = p.peak_bytes;
        q["recompute_ns"] = p.recompute_ns;
        q["offload_bytes"] = p.offload_bytes;
        q["sub_batch"] = p.sub_batch;
      } else {
        q["why"] = p.why;
      }
      q["envelope_overhead"] =
          p.held_by >= 0 ? nlohmann::ordered_json(overhead(pts[p.held_by])) : nlohmann::ordered_json(nullptr);
      q["envelope_budget_bytes"] =
          p.held_by >= 0 ? nlohmann::ordered_json(pts[p.held_by].budget) : nlohmann::ordered_json(nullptr);
      j["points"].push_back(q);
    }
    j["knees"] = nlohmann::ordered_json::array();
    for (auto& [t, at] : knees)
      j["knees"].push_back({{"overhead_at_most", t},
                            {"budget_bytes", at ? nlohmann::ordered_json(*at) : nlohmann::ordered_json(nullptr)}});
    fmt::print("{}\n", j.dump(2));
  } else {
    // Where even unlimited memory is over a threshold, say so, with what that plan still does
    // (a baseline strategy recomputes or offloads whatever the memory) and the wait for the batch's
    // copy to the device before the first layer.
    const double unlimited = static_cast<double>(unlimited_plan.summary.predicted_ns) /
                                 static_cast<double>(unlimited_plan.summary.ideal_ns) -
                             1;
    std::string unlimited_wait;
    if (unlimited_plan.summary.recompute_ns > 0)
      unlimited_wait += fmt::format(", recomputing for {}", format_ns(unlimited_plan.summary.recompute_ns));
    if (unlimited_plan.summary.offload_bytes > 0)
      unlimited_wait += fmt::format(", offloading {}", format_bytes(unlimited_plan.summary.offload_bytes));
    if (const std::int64_t wait_ns = first_layer_wait_ns(unlimited_plan); wait_ns > 0)
      unlimited_wait +=
          fmt::format(", its first layer waiting {} for the batch's copy to the device", format_ns(wait_ns));
    for (auto& [t, at] : knees)
      fmt::print("  within {:<8} {}\n", format_percent(t),
                 at ? fmt::format("from {} on (of the budgets above)", format_bytes(*at))
                    : fmt::format("at none{}: with unlimited memory the plan is {} over the ideal{}",
                                  unlimited > t ? "" : " of the budgets above", format_percent(unlimited),
                                  unlimited > t ? unlimited_wait
                                                : fmt::format(" (a peak of {})",
                                                              format_bytes(unlimited_plan.summary.peak_bytes))));
  }
  if (!o.svg.empty())
    write_file_atomically(o.svg, frontier_svg(fmt::format("{} b{}: predicted overhead over the ideal vs budget ({})",
                                                          in.network.name, top.batch, o.strategy),
                                              pts));
  return 0;
}

}  // namespace ucplan
