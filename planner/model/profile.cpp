#include "profile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "errors.h"
#include "json_util.h"
#include "network.h"
#include "units.h"

namespace ucplan {

double TransferCosts::seconds(std::int64_t bytes) const {
  if (bytes <= 0) return 0;
  UCPLAN_CHECK(bytes_per_second > 0, "transfer bandwidth must be positive");
  return latency_seconds + static_cast<double>(bytes) / bytes_per_second;
}

TransferCosts fit_transfers(const std::vector<TransferPoint>& points) {
  UCPLAN_CHECK(points.size() >= 2, "a transfer fit needs two points");
  // Ordinary least squares of seconds on bytes; slope = 1 / bandwidth, intercept = latency.
  double n = static_cast<double>(points.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : points) {
    const double x = static_cast<double>(p.bytes);
    sx += x;
    sy += p.seconds;
    sxx += x * x;
    sxy += x * p.seconds;
  }
  double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double intercept = (sy - slope * sx) / n;
  if (intercept < 0) {  // no negative latency: the best line through the origin instead
    slope = sxy / sxx;
    intercept = 0;
  }
  if (!(slope > 0) || !std::isfinite(slope)) {  // degenerate measurements: the largest point alone
    const auto& big =
        *std::max_element(points.begin(), points.end(), [](auto& a, auto& b) { return a.bytes < b.bytes; });
    slope = big.seconds / static_cast<double>(big.bytes);
    intercept = 0;
  }
  TransferCosts t;
  t.latency_seconds = intercept;
  t.bytes_per_second = 1.0 / slope;
  t.points = points;
  return t;
}

const SignatureCosts* Profile::find(const std::string& signature) const {
  for (const auto& s : signatures)
    if (s.signature == signature) return &s;
  return nullptr;
}

const char* sizes_policy_name(SizesPolicy p) {
  switch (p) {
    case SizesPolicy::All:
      return "all";
    case SizesPolicy::PowerOfTwo:
      return "powerOfTwo";
    case SizesPolicy::Undivided:
      return "undivided";
  }
  return "?";
}

std::optional<SizesPolicy> parse_sizes_policy(const std::string& text) {
  for (SizesPolicy p : {SizesPolicy::All, SizesPolicy::PowerOfTwo, SizesPolicy::Undivided})
    if (text == sizes_policy_name(p)) return p;
  return std::nullopt;
}

// Half a core's worth of other work: the profiler's products run on every core, so a core shared
// half the time slows them.
constexpr double kSharedCpuCores = 0.5;

std::string shared_cpu_warning(const Profile& p) {
  auto number = [&](const char* key) -> std::optional<double> {
    const auto it = p.device.versions.find(key);
    if (it == p.device.versions.end()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) return std::nullopt;
    return v;
  };
  const auto others = number("cpu_busy_others"), cores = number("cpu_cores"), seconds = number("measured_seconds");
  if (!others || !cores || !seconds || *others < kSharedCpuCores) return "";
  return fmt::format(
      "other work kept {:.1f} of this machine's {:.0f} cores busy on average while the profile was measured ({}): "
      "its kernel times may be inflated; profile on an idle machine, or with more --repeat",
      *others, *cores, format_seconds(*seconds));
}

std::vector<std::int64_t> micro_batch_sizes(SizesPolicy policy, std::int64_t batch) {
  std::vector<std::int64_t> s;
  switch (policy) {
    case SizesPolicy::All:
      for (std::int64_t b = 1; b <= batch; ++b) s.push_back(b);
      break;
    case SizesPolicy::PowerOfTwo:
      for (std::int64_t b = 1; b <= batch; b *= 2) s.push_back(b);
      if (s.back() != batch) s.push_back(batch);  // the undivided batch is always measured
      break;
    case SizesPolicy::Undivided:
      s.push_back(batch);
      break;
  }
  return s;
}

namespace {

// The canonical order of a signature's costs (the ops a profile can hold; 5 for the others).
int op_rank(StepOp op) {
  constexpr StepOp kOrder[] = {StepOp::Forward, StepOp::Backward, StepOp::BackwardData, StepOp::BackwardFilter,
                               StepOp::Update};
  for (int i = 0; i < 5; ++i)
    if (op == kOrder[i]) return i;
  return 5;
}

TransferCosts read_transfer(const JsonReader& r) {
  r.allow_only({"latency_seconds", "bytes_per_second", "points", "calibration"});
  TransferCosts t;
  t.latency_seconds = r.at("latency_seconds").number();
  t.bytes_per_second = r.at("bytes_per_second").number();
  // Bounds that keep every predicted time far inside int64 nanoseconds (no real link is slower
  // than 1 MB/s or waits a second to start).
  if (!(t.latency_seconds >= 0 && t.latency_seconds <= 1)) r.at("latency_seconds").fail("must be between 0 and 1 s");
  if (!(t.bytes_per_second >= 1e6 && std::isfinite(t.bytes_per_second)))
    r.at("bytes_per_second").fail("must be at least 1e6 (1 MB/s) and finite");
  if (auto pts = r.find("points")) {
    for (const auto& p : pts->array()) {
      p.allow_only({"bytes", "seconds"});
      const std::int64_t bytes = p.at("bytes").integer(1, INT64_MAX);
      const double seconds = p.at("seconds").number();
      if (!(seconds > 0 && seconds <= 1e3))
        p.at("seconds").fail("a copy's time must be more than 0 and at most 1000 s");
      t.points.push_back({bytes, seconds});
    }
  }
  if (auto c = r.find("calibration")) {
    c->allow_only({"traces", "copies", "overlapped", "bench_latency_seconds", "bench_bytes_per_second"});
    TransferCalibration k;
    k.traces = static_cast<int>(c->at("traces").integer(1, INT32_MAX));
    k.copies = static_cast<int>(c->at("copies").integer(2, INT32_MAX));
    k.overlapped = static_cast<int>(c->integer_or("overlapped", 0, 0, INT32_MAX));
    k.bench_latency_seconds = c->at("bench_latency_seconds").number();
    k.bench_bytes_per_second = c->at("bench_bytes_per_second").number();
    if (!(k.bench_latency_seconds >= 0 && k.bench_latency_seconds <= 1))
      c->at("bench_latency_seconds").fail("must be between 0 and 1 s");
    if (!(k.bench_bytes_per_second >= 1e6 && std::isfinite(k.bench_bytes_per_second)))
      c->at("bench_bytes_per_second").fail("must be at least 1e6 (1 MB/s) and finite");
    t.calibration = k;
  }
  return t;
}

OrderedJson transfer_json(const TransferCosts& t) {
  OrderedJson j;
  j["latency_seconds"] = t.latency_seconds;
  j["bytes_per_second"] = t.bytes_per_second;
  OrderedJson pts = OrderedJson::array();
  for (const auto& p : t.points) pts.push_back({{"bytes", p.bytes}, {"seconds", p.seconds}});
  j["points"] = std::move(pts);
  if (const auto& c = t.calibration)
    j["calibration"] = {{"traces", c->traces},
                        {"copies", c->copies},
                        {"overlapped", c->overlapped},
                        {"bench_latency_seconds", c->bench_latency_seconds},
                        {"bench_bytes_per_second", c->bench_bytes_per_second}};
  return j;
}

}  // namespace

void canonicalize(Profile& p) {
  std::sort(p.signatures.begin(), p.signatures.end(),
            [](const SignatureCosts& a, const SignatureCosts& b) { return a.signature < b.signature; });
  for (auto& s : p.signatures) {
    std::stable_sort(s.costs.begin(), s.costs.end(), [](const OpCost& a, const OpCost& b) {
      if (op_rank(a.op) != op_rank(b.op)) return op_rank(a.op) < op_rank(b.op);
      if (a.batch != b.batch) return a.batch < b.batch;
      return a.algo < b.algo;
    });
  }
}

OpCost read_op_cost(const JsonReader& cr, std::int64_t max_batch) {
  OpCost c;
  const std::string op = cr.at("op").string();
  if (!parse_step_op(op, &c.op) || op_rank(c.op) == 5)
    cr.at("op").fail(fmt::format("unknown op \"{}\" (forward, backward, backward_data, backward_filter, update)", op));
  c.algo = cr.at("algo").string();
  // An update's cost is per layer, not per sample (batch 0); every other op's is at a sub-batch.
  c.batch = cr.at("batch").integer(0, max_batch);
  if ((c.batch == 0) != (c.op == StepOp::Update))
    cr.at("batch").fail(c.op == StepOp::Update ? "an update's cost is per layer, at batch 0"
                                               : "a cost is at a sub-batch of 1 sample or more (0 is for updates)");
  c.status = cr.string_or("status", "ok");
  if (c.status != "ok" && c.status != "unsupported" && c.status != "out_of_memory" &&
      c.status.rfind("failed: ", 0) != 0)
    cr.at("status").fail(
        fmt::format("must be ok, unsupported, out_of_memory or \"failed: REASON\", got \"{}\"", c.status));
  if (c.ok()) {
    c.seconds = cr.at("seconds").number();
    if (!(c.seconds >= 0) || !std::isfinite(c.seconds)) cr.at("seconds").fail("must be a finite, non-negative number");
    if (c.seconds > kMaxOpSeconds)
      cr.at("seconds").fail(fmt::format("{} s for one op: at most {:g} s is plausible", c.seconds, kMaxOpSeconds));
    c.spread = cr.number_or("spread", 0);
    if (!(c.spread >= 0) || !std::isfinite(c.spread)) cr.at("spread").fail("must be a finite, non-negative number");
    c.workspace_bytes = cr.integer_or("workspace_bytes", 0, 0, std::int64_t{1} << 50);  // 1 PiB: sums stay in int64
  }
  return c;
}

Profile load_profile(const std::string& path) {
  Json j = load_json_file(path);
  JsonReader r(j, path, "");
  r.expect_format("profile");
  r.allow_only({"format", "source", "date", "device", "network", "network_sha256", "batch", "precision", "sizes_policy",
                "sizes", "repeat", "transfer", "launch_gap", "signatures"});
  Profile p;
  p.source = r.at("source").string();
  if (p.source != "measured" && p.source.rfind("model:", 0) != 0)
    r.at("source").fail(fmt::format("must be \"measured\" or \"model:NAME\", got \"{}\"", p.source));
  p.date = r.string_or("date", "");
  auto d = r.at("device");
  d.allow_only({"kind", "name", "memory_bytes", "peak_flops", "versions"});
  p.device.kind = d.at("kind").string();
  if (p.device.kind != "cpu" && p.device.kind != "cuda" && p.device.kind != "model")
    d.at("kind").fail(fmt::format("must be cpu, cuda or model, got \"{}\"", p.device.kind));
  if ((p.device.kind == "model") != (p.source != "measured"))
    r.at("source").fail(
        fmt::format("\"{}\" does not agree with device.kind \"{}\" (a model device's profile has source "
                    "\"model:NAME\"; a real device's has \"measured\")",
                    p.source, p.device.kind));
  p.device.name = d.at("name").string();
  p.device.memory_bytes = d.integer_or("memory_bytes", 0, 0, INT64_MAX);
  p.device.peak_flops = d.number_or("peak_flops", 0);
  if (auto v = d.find("versions")) {
    if (!v->raw().is_object()) v->fail("expected an object of strings");
    for (auto it = v->raw().begin(); it != v->raw().end(); ++it) p.device.versions[it.key()] = v->at(it.key()).string();
  }
  p.network = r.at("network").string();
  p.network_sha256 = r.string_or("network_sha256", "");
  p.batch = r.at("batch").integer(1, kMaxBatch);
  if (r.has("precision") && !parse_precision(r.at("precision").string(), &p.precision))
    r.at("precision").fail(fmt::format("must be {}, got \"{}\"", precision_choices(), r.at("precision").string()));
  const std::string policy = r.at("sizes_policy").string();
  if (auto parsed = parse_sizes_policy(policy))
    p.sizes_policy = *parsed;
  else
    r.at("sizes_policy").fail(fmt::format("must be all, powerOfTwo or undivided, got \"{}\"", policy));
  // The micro-batch sizes measured: the policy's (micro_batch_sizes), or some of them.
  const std::vector<std::int64_t> policy_sizes = micro_batch_sizes(p.sizes_policy, p.batch);
  for (const auto& s : r.at("sizes").array(1, 1 << 24)) {
    p.sizes.push_back(s.integer(1, p.batch));
    if (!std::binary_search(policy_sizes.begin(), policy_sizes.end(), p.sizes.back()))
      s.fail(fmt::format("{} samples is not a size of the {} policy at batch {}", p.sizes.back(),
                         sizes_policy_name(p.sizes_policy), p.batch));
  }
  const std::set<std::int64_t> sizes(p.sizes.begin(), p.sizes.end());
  p.repeat = static_cast<int>(r.integer_or("repeat", 1, 1, 1 << 20));
  auto t = r.at("transfer");
  t.allow_only({"h2d", "d2h", "duplex"});
  p.h2d = read_transfer(t.at("h2d"));
  p.d2h = read_transfer(t.at("d2h"));
  p.duplex = t.at("duplex").boolean();
  if (auto lg = r.find("launch_gap")) {
    lg->allow_only({"seconds", "traces", "gaps"});
    LaunchGap gap;
    gap.seconds = lg->at("seconds").number();
    if (!(gap.seconds >= 0 && gap.seconds <= LaunchGap::kMaxSeconds))
      lg->at("seconds").fail(fmt::format("must be between 0 and {} s", LaunchGap::kMaxSeconds));
    gap.traces = static_cast<int>(lg->at("traces").integer(1, INT32_MAX));
    gap.gaps = static_cast<int>(lg->at("gaps").integer(1, INT32_MAX));
    if (!p.measured()) lg->fail("a modelled profile has no launch gap: `ucplan calibrate` fits one from measured runs");
    p.launch_gap = gap;
  }
  // One entry per signature, and per signature one cost per op, algorithm and micro-batch: which
  // of two would count?
  std::set<std::string> signatures;
  for (const auto& sr : r.at("signatures").array()) {
    sr.allow_only({"signature", "type", "layers", "costs"});
    SignatureCosts s;
    s.signature = sr.at("signature").string();
    if (!signatures.insert(s.signature).second) sr.at("signature").fail("a second entry for this signature");
    s.type = sr.at("type").string();
    if (s.type != s.signature.substr(0, s.signature.find(' ')))
      sr.at("type").fail(fmt::format("\"{}\" is not the type its signature begins with", s.type));
    // A signature ends with the precision its layer ran at (graph.cpp layer_signature).
    const std::string dtype = std::string(" ") + signature_dtype(p.precision);
    if (s.signature.size() < dtype.size() ||
        s.signature.compare(s.signature.size() - dtype.size(), dtype.size(), dtype))
      sr.at("signature")
          .fail(fmt::format("does not end with{}, the profile's precision ({})", dtype, precision_name(p.precision)));
    for (const auto& l : sr.at("layers").array()) s.layers.push_back(l.string());
    std::set<std::tuple<StepOp, std::string, std::int64_t>> measured;
    for (const auto& cr : sr.at("costs").array()) {
      cr.allow_only({"op", "algo", "batch", "status", "seconds", "spread", "workspace_bytes"});
      OpCost c = read_op_cost(cr, p.batch);
      // A cost at a size the profile does not list would be used by compile and not by
      // compile --conv-only, which offers the policy's sizes.
      if (c.op != StepOp::Update && !sizes.count(c.batch))
        cr.at("batch").fail(fmt::format("{} samples is not one of the profile's sizes", c.batch));
      // Only convolutions have algorithms to choose (their names are checked against the device's
      // when a plan is made); the executor runs every other op one way, and updates as SGD.
      const char* const only = c.op == StepOp::Update ? "sgd" : s.type != "conv" ? "default" : nullptr;
      if (only && c.algo != only)
        cr.at("algo").fail(
            fmt::format("a {} {} runs one way, \"{}\", not \"{}\"", s.type, step_op_name(c.op), only, c.algo));
      if (!measured.insert({c.op, c.algo, c.batch}).second)
        cr.fail(fmt::format("a second cost for {} with \"{}\" at {} samples", step_op_name(c.op), c.algo, c.batch));
      s.costs.push_back(std::move(c));
    }
    p.signatures.push_back(std::move(s));
  }
  return p;
}

std::string profile_to_json_text(const Profile& p) {
  OrderedJson j;
  j["format"] = "ucplan-profile/1";
  j["source"] = p.source;
  if (!p.date.empty()) j["date"] = p.date;
  OrderedJson d;
  d["kind"] = p.device.kind;
  d["name"] = p.device.name;
  d["memory_bytes"] = p.device.memory_bytes;
  d["peak_flops"] = p.device.peak_flops;
  OrderedJson versions = OrderedJson::object();
  for (const auto& [k, v] : p.device.versions) versions[k] = v;
  d["versions"] = std::move(versions);
  j["device"] = std::move(d);
  j["network"] = p.network;
  if (!p.network_sha256.empty()) j["network_sha256"] = p.network_sha256;
  j["batch"] = p.batch;
  // Absent at fp32, so profiles made before precisions existed stay as they were.
  if (p.precision != Precision::FP32) j["precision"] = precision_name(p.precision);
  j["sizes_policy"] = sizes_policy_name(p.sizes_policy);
  j["sizes"] = p.sizes;
  j["repeat"] = p.repeat;
  j["transfer"] = {{"h2d", transfer_json(p.h2d)}, {"d2h", transfer_json(p.d2h)}, {"duplex", p.duplex}};
  if (const auto& g = p.launch_gap)
    j["launch_gap"] = {{"seconds", g->seconds}, {"traces", g->traces}, {"gaps", g->gaps}};
  OrderedJson sigs = OrderedJson::array();
  for (const auto& s : p.signatures) {
    OrderedJson sj;
    sj["signature"] = s.signature;
    sj["type"] = s.type;
    sj["layers"] = s.layers;
    OrderedJson costs = OrderedJson::array();
    for (const auto& c : s.costs) {
      OrderedJson cj;
      cj["op"] = step_op_name(c.op);
      cj["algo"] = c.algo;
      cj["batch"] = c.batch;
      cj["status"] = c.status;
      if (c.ok()) {
        cj["seconds"] = c.seconds;
        cj["spread"] = c.spread;
        cj["workspace_bytes"] = c.workspace_bytes;
      }
      costs.push_back(std::move(cj));
    }
    sj["costs"] = std::move(costs);
    sigs.push_back(std::move(sj));
  }
  j["signatures"] = std::move(sigs);
  return dump_json(j);
}

}  // namespace ucplan
