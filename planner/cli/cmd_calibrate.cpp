// `ucplan calibrate`: a measured profile refit from measured runs: its copy costs and its launch gap.
//
// The profiler times each copy alone, on an idle device. A plan's copies run beside the plan's own
// kernels, and on an H100 they ran slower than that: over ResNet-50 b64 plans at 25 and 50 % of the
// liveness peak, offloads 1.13x and prefetches 1.06-1.09x their prediction, one direction alone
// (benchmarks/RESULTS.md, gpu_results.py part G), so plans offloaded more than they should have.
// `ucplan run PLAN --device cuda --trace T.json` records every copy's bytes and measured time; this
// command fits latency + bytes / bandwidth per direction to those copies (profile.h fit_transfers,
// the profiler's own fit), and writes the profile again with that fit, the copies as its points and
// the profiler's fit kept beside it (TransferCalibration). Left out: copies that a copy in the
// other direction overlapped for more than half their time (the profile's one `duplex` flag models
// both directions at once; what they took is reported, not fitted).
//
// The profiler times one kernel at a time (run back to back, many times), and a plan's kernels do
// not follow each other without a pause: in every trace of the H100 sessions (ResNet-20 b64 and
// ResNet-50 b64, 210 to 590 kernels a round, sessions 3 and 8) the most common gap between two
// consecutive compute kernels is 1.25 us. The launch gap (profile.h LaunchGap) is the median of
// the gaps within 1.5 times the longest of the shortest tenth (1.25 to 1.47 us on those traces),
// which the cost table then adds to every kernel (costs.cpp). The longer gaps are left out: kernels
// that waited (for a copy, an event, memory), and gaps whose cause is not known yet (2.2 to 2.8 us
// are common on ResNet-50 plans that copy, before steps that wait for nothing too).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/profile.h"
#include "planner/model/sha256.h"
#include "planner/model/units.h"

namespace ucplan {

namespace {

struct Copy {
  bool h2d = false;
  double start_us = 0, end_us = 0;
  std::int64_t bytes = 0;
};

struct Trace {
  std::vector<Copy> copies;
  std::vector<double> gaps_us;  // between consecutive compute kernels of one round
};

// The copies and compute gaps of one measured trace written by `ucplan run --trace` of a plan for
// `profile`'s network, on its device where the trace says which (traces written before runs recorded
// their device, otherData.device, are taken on trust).
Trace read_trace(const std::string& path, const Profile& profile) {
  const std::string& network = profile.network;
  const Json j = load_json_file(path);
  const JsonReader r(j, path, "");
  if (!j.is_object() || !r.has("traceEvents") || !r.has("otherData"))
    r.fail("not a ucplan trace (a Chrome trace with otherData and traceEvents, from `ucplan run --trace`)");
  const JsonReader other = r.at("otherData");
  const std::string timeline = other.at("timeline").string();
  if (timeline != "measured")
    other.at("timeline")
        .fail(fmt::format("\"{}\": a predicted timeline (ucplan compile or explain --trace); calibrate needs one "
                          "measured by `ucplan run "
                          "--trace`",
                          timeline));
  const std::string traced = other.at("network").string();
  if (traced != network)
    other.at("network").fail(
        fmt::format("a run of \"{}\", but the profile is of \"{}\": calibrate with runs of the profile's network",
                    traced, network));
  if (other.has("device")) {
    const JsonReader device = other.at("device");
    device.allow_only({"kind", "name"});
    const std::string kind = device.at("kind").string(), name = device.at("name").string();
    if (kind != profile.device.kind || name != profile.device.name)
      device.fail(
          fmt::format("a run on {} \"{}\", but the profile was measured on {} \"{}\": calibrate with runs "
                      "on the profile's device",
                      kind, name, profile.device.kind, profile.device.name));
  }
  Trace trace;
  std::vector<Copy>& copies = trace.copies;
  // Times in microseconds, as ucplan run writes them: an event at most 1000 s long (a profile's
  // bound on a copy), starting within a day of the trace's origin, so that every sum is finite.
  constexpr double kMaxEventUs = 1e9, kMaxStartUs = 86400e6;
  auto event_start_us = [&](const JsonReader& e) {
    const double ts = e.at("ts").number();
    if (!(std::fabs(ts) <= kMaxStartUs))
      e.at("ts").fail("must be a time in microseconds within a day of the trace's start");
    return ts;
  };
  // The compute stream's thread: the one the trace names "compute".
  std::optional<std::int64_t> compute_tid;
  for (const JsonReader& e : r.at("traceEvents").array())
    if (e.raw().is_object() && e.has("ph") && e.has("tid") && e.has("args") && e.at("ph").raw() == "M" &&
        e.at("args").raw().is_object() && e.at("args").has("name") && e.at("args").at("name").raw() == "compute")
      compute_tid = e.at("tid").integer(0, INT64_MAX);
  struct Kernel {
    std::int64_t round;
    double start_us, end_us;
  };
  std::vector<Kernel> kernels;
  for (const JsonReader& e : r.at("traceEvents").array()) {
    if (compute_tid && e.raw().is_object() && e.has("tid") && e.has("ph") && e.at("ph").raw() == "X" &&
        e.at("tid").raw() == *compute_tid) {
      const double ts = event_start_us(e), dur = e.at("dur").number();
      if (!(dur >= 0 && dur <= kMaxEventUs)) e.at("dur").fail("a kernel's time must be 0 or more and at most 1000 s");
      const std::int64_t round = e.has("args") && e.at("args").has("round")
                                     ? e.at("args").at("round").integer(-1, INT64_MAX)
                                     : 0;  // -1: the updates
      kernels.push_back({round, ts, ts + dur});
      continue;
    }
    if (!e.raw().is_object() || !e.has("cat")) continue;
    const std::string cat = e.at("cat").string();
    if (cat != "offload" && cat != "prefetch") continue;
    Copy c;
    c.h2d = cat == "prefetch";
    c.start_us = event_start_us(e);
    const double dur = e.at("dur").number();
    // As a profile holds a copy's time (profile.cpp): a copy of 0 s would give an infinite bandwidth.
    if (!(dur > 0 && dur <= kMaxEventUs)) e.at("dur").fail("a copy's time must be more than 0 and at most 1000 s");
    c.end_us = c.start_us + dur;
    const JsonReader args = e.at("args");
    if (!args.has("bytes"))
      args.fail(
          "a copy without its bytes: the trace was written by a ucplan run from before calibrate existed; run the "
          "plan again with --trace");
    c.bytes = args.at("bytes").integer(1, std::int64_t{1} << 50);
    copies.push_back(c);
  }
  std::sort(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) {
    return std::tie(a.start_us, a.end_us) < std::tie(b.start_us, b.end_us);
  });
  for (std::size_t i = 1; i < kernels.size(); ++i)
    if (kernels[i].round == kernels[i - 1].round && kernels[i].start_us >= kernels[i - 1].end_us)
      trace.gaps_us.push_back(kernels[i].start_us - kernels[i - 1].end_us);
  return trace;
}

// The launch gap of the pooled gaps (sorted): the median of those within 1.5 times the longest of
// the shortest tenth. Empty below kMinGaps gaps.
constexpr std::size_t kMinGaps = 16;
std::optional<LaunchGap> fit_launch_gap(std::vector<double> gaps_us, int traces) {
  if (gaps_us.size() < kMinGaps) return std::nullopt;
  std::sort(gaps_us.begin(), gaps_us.end());
  const double limit = 1.5 * gaps_us[(gaps_us.size() - 1) / 10];
  const std::size_t within =
      static_cast<std::size_t>(std::upper_bound(gaps_us.begin(), gaps_us.end(), limit) - gaps_us.begin());
  LaunchGap g;
  g.seconds = std::round(gaps_us[(within - 1) / 2] * 1e3) / 1e9;  // to the nanosecond, as the cost table counts
  g.traces = traces;
  g.gaps = static_cast<int>(within);
  return g;
}

// The copies of one direction sorted by start, with the latest end up to each: one stream never
// runs two at once, but a trace is input, so nothing here relies on that.
struct Lane {
  std::vector<const Copy*> by_start;
  std::vector<double> end_so_far;
};

Lane make_lane(std::vector<const Copy*> copies) {
  Lane l{std::move(copies), {}};
  double latest = -INFINITY;
  for (const Copy* c : l.by_start) l.end_so_far.push_back(latest = std::max(latest, c->end_us));
  return l;
}

// How long a copy ran beside the other direction's copies (summed over them).
double overlap_us(const Copy& c, const Lane& other) {
  // The first copy that could reach past c's start: end_so_far is non-decreasing.
  std::size_t i = static_cast<std::size_t>(
      std::upper_bound(other.end_so_far.begin(), other.end_so_far.end(), c.start_us) - other.end_so_far.begin());
  double sum = 0;
  for (; i < other.by_start.size() && other.by_start[i]->start_us < c.end_us; ++i) {
    const Copy& o = *other.by_start[i];
    sum += std::max(0.0, std::min(c.end_us, o.end_us) - std::max(c.start_us, o.start_us));
  }
  return sum;
}

struct Direction {
  std::vector<TransferPoint> alone;  // the copies fitted
  std::vector<Copy> overlapped;      // left out: a copy the other way ran beside them
};

}  // namespace

int run_calibrate(const CalibrateOptions& o) {
  if (o.traces.empty()) throw UserError("", "--trace", "at least one measured trace (ucplan run PLAN --trace T.json)");
  if (o.output.empty()) throw UserError("", "-o", "the calibrated profile's file is required");
  // -o may be the profile itself (refitted in place); never one of the traces it is fitted from.
  std::vector<FileArgument> traces;
  for (const std::string& t : o.traces) {
    for (const FileArgument& seen : traces)
      if (same_file(t, seen.path))
        throw UserError(t, "--trace", "is given twice: each measured trace counts once in the fit");
    traces.push_back({"a trace (--trace)", t});
  }
  check_outputs({{"-o", o.output}}, traces);
  Profile p = load_profile(o.profile);
  if (!p.measured())
    throw UserError(
        o.profile, "source",
        fmt::format("\"{}\" is modelled: calibrate refits a measured profile from measured runs", p.source));
  const bool want_copies = o.fit != "launch", want_launch = o.fit != "copies";
  Direction dirs[2];  // d2h, h2d
  std::vector<double> gaps_us;
  std::map<std::string, std::string> trace_of_bytes;  // sha256 -> the first trace with those bytes
  for (const std::string& path : o.traces) {
    // A copy of a trace is the same run: counted twice it would weigh double in the fit.
    const auto [first, fresh] = trace_of_bytes.emplace(sha256_hex(read_file_bytes(path)), path);
    if (!fresh)
      throw UserError(
          path, "--trace",
          fmt::format("holds the same bytes as {}: each measured trace counts once in the fit", first->second));
    Trace trace = read_trace(path, p);
    gaps_us.insert(gaps_us.end(), trace.gaps_us.begin(), trace.gaps_us.end());
    std::vector<Copy>& copies = trace.copies;
    std::sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) { return a.start_us < b.start_us; });
    std::vector<const Copy*> by_dir[2];
    for (const Copy& c : copies) by_dir[c.h2d].push_back(&c);
    const Lane lanes[2] = {make_lane(by_dir[0]), make_lane(by_dir[1])};
    for (const Copy& c : copies) {
      const double dur = c.end_us - c.start_us;
      if (overlap_us(c, lanes[!c.h2d]) > 0.5 * dur)
        dirs[c.h2d].overlapped.push_back(c);
      else
        dirs[c.h2d].alone.push_back({c.bytes, dur * 1e-6});
    }
  }
  // Per direction: the new fit, its points sorted (the order of --trace changes nothing).
  const char* names[2] = {"d2h", "h2d"};
  const char* words[2] = {"device-to-host", "host-to-device"};
  TransferCosts* costs[2] = {&p.d2h, &p.h2d};
  std::string report;
  int refit = 0;
  std::vector<std::string> not_refit;  // why, for the error when nothing is
  for (int d : {1, 0}) {
    if (!want_copies) break;
    Direction& dir = dirs[d];
    std::sort(dir.alone.begin(), dir.alone.end(), [](const TransferPoint& a, const TransferPoint& b) {
      return a.bytes != b.bytes ? a.bytes < b.bytes : a.seconds < b.seconds;
    });
    std::vector<std::int64_t> sizes;
    for (const auto& pt : dir.alone) sizes.push_back(pt.bytes);
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    if (sizes.size() < 2) {
      const std::string why = fmt::format(
          "{} {} copies ran alone in the {} trace(s), of {} size(s): a fit needs copies of two sizes at "
          "least (a plan that offloads more, at a tighter budget, has them)",
          dir.alone.size(), words[d], o.traces.size(), sizes.size());
      if (o.fit == "copies") throw UserError(o.traces.front(), "traceEvents", why);
      report += fmt::format("  {}  not refit: {}\n", names[d], why);
      not_refit.push_back(why);
      continue;
    }
    const TransferCosts& before = *costs[d];
    TransferCalibration k;
    k.traces = static_cast<int>(o.traces.size());
    k.copies = static_cast<int>(dir.alone.size());
    k.overlapped = static_cast<int>(dir.overlapped.size());
    // Calibrating again replaces the last calibration: "bench" stays the profiler's own fit.
    k.bench_latency_seconds = before.calibration ? before.calibration->bench_latency_seconds : before.latency_seconds;
    k.bench_bytes_per_second =
        before.calibration ? before.calibration->bench_bytes_per_second : before.bytes_per_second;
    TransferCosts fit = fit_transfers(dir.alone);
    fit.calibration = k;
    // What a profile holds (profile.cpp read_transfer): anything else is not a copy of this kind.
    if (!(fit.bytes_per_second >= 1e6 && std::isfinite(fit.bytes_per_second) && fit.latency_seconds <= 1))
      throw UserError(o.traces.front(), "traceEvents",
                      fmt::format("the {} copies fit {:.3g} B/s + {:.3g} s, outside what a profile holds (at least "
                                  "1 MB/s, at most 1 s to start): are these traces of this device?",
                                  words[d], fit.bytes_per_second, fit.latency_seconds));
    double measured = 0, bench = 0;
    for (const auto& pt : dir.alone) {
      measured += pt.seconds;
      bench += k.bench_latency_seconds + static_cast<double>(pt.bytes) / k.bench_bytes_per_second;
    }
    report += fmt::format(
        "  {}  {:.2f} GB/s + {} (profiler) -> {:.2f} GB/s + {} from {} copies that ran alone; the "
        "profiler's fit predicted them {:.3f}x their measured time",
        names[d], k.bench_bytes_per_second / 1e9, format_seconds(k.bench_latency_seconds), fit.bytes_per_second / 1e9,
        format_seconds(fit.latency_seconds), k.copies, bench / measured);
    if (!dir.overlapped.empty()) {
      double ran = 0, predicted = 0;
      for (const Copy& c : dir.overlapped) {
        ran += (c.end_us - c.start_us) * 1e-6;
        predicted += fit.seconds(c.bytes);
      }
      report += fmt::format("; {} left out, overlapped by a copy the other way: they ran {:.2f}x the new fit",
                            dir.overlapped.size(), predicted > 0 ? ran / predicted : 0.0);
    }
    report += "\n";
    *costs[d] = std::move(fit);
    ++refit;
  }
  if (want_launch) {
    const std::optional<LaunchGap> gap = fit_launch_gap(gaps_us, static_cast<int>(o.traces.size()));
    // What a profile holds (profile.cpp): a calibrated profile that its own loader refused was
    // written from a trace whose kernels stood a second apart.
    if (gap && !(gap->seconds <= LaunchGap::kMaxSeconds))
      throw UserError(o.traces.front(), "traceEvents",
                      fmt::format("the gaps between compute kernels fit {} a kernel, more than a launch takes (at "
                                  "most {}): are these traces of this device, with nothing else running?",
                                  format_seconds(gap->seconds), format_seconds(LaunchGap::kMaxSeconds)));
    if (gap) {
      report += fmt::format(
          "  launch  {} between kernels that wait for nothing{} (the median of the {} gaps within 1.5x the shortest "
          "tenth's longest, of {} between consecutive compute kernels), added to every kernel's time\n",
          format_seconds(gap->seconds),
          p.launch_gap ? fmt::format(", was {}", format_seconds(p.launch_gap->seconds)) : std::string(), gap->gaps,
          gaps_us.size());
      p.launch_gap = gap;
      ++refit;
    } else {
      const std::string why = fmt::format(
          "{} gaps between consecutive compute kernels in the {} trace(s): a fit needs {} at least (a trace of a "
          "whole round has hundreds)",
          gaps_us.size(), o.traces.size(), kMinGaps);
      if (o.fit == "launch") throw UserError(o.traces.front(), "traceEvents", why);
      report += fmt::format("  launch  not refit: {}\n", why);
      not_refit.push_back(why);
    }
  }
  if (refit == 0)
    throw UserError(o.traces.front(), "traceEvents", fmt::format("nothing to refit: {}", fmt::join(not_refit, "; ")));
  write_file_atomically(o.output, profile_to_json_text(p));
  fmt::print("calibrated {} b{} ({}) from {} measured trace{} -> {}\n{}", p.network, p.batch, p.device.name,
             o.traces.size(), o.traces.size() == 1 ? "" : "s", o.output, report);
  fmt::print("  duplex  {} (as profiled: copies in both directions at once are not refit)\n", p.duplex ? "yes" : "no");
  return 0;
}

}  // namespace ucplan
