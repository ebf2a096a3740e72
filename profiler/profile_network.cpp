#include "profile_network.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "cache.h"
#include "planner/model/errors.h"
#include "planner/model/sha256.h"
#include "planner/ir/tasks.h"
#include "planner/model/units.h"

namespace ucplan {

namespace {

std::string today_utc() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

struct Job {
  int layer;
  std::string signature;
  TaskKind op;
  std::string algo;
  std::int64_t batch;
  double work;  // expected cost, for the time-left estimate
};

}  // namespace

Profile profile_network(const Network& net, const std::string& file, Runner& runner, const ProfileOptions& o) {
  const Graph g = build_graph(net, file, o.precision);
  std::vector<int> order = g.topo_order;
  const TaskGraph tg = build_tasks(g, order);

  Profile p;
  p.source = runner.source();
  p.device = runner.device();
  if (p.source == "measured") p.date = today_utc();
  p.network = net.name;
  p.network_sha256 = sha256_hex(network_to_json_text(net));
  p.batch = o.batch;
  p.precision = o.precision;
  p.sizes_policy = o.sizes;
  p.sizes = micro_batch_sizes(o.sizes, o.batch);
  p.repeat = o.repeat;

  // Distinct (signature, op) pairs the iteration runs, in task order.
  std::map<std::string, SignatureCosts> by_sig;
  std::vector<Job> jobs;
  std::set<std::pair<std::string, std::string>> seen;
  std::set<std::pair<std::string, int>> listed;
  for (const Task& t : tg.tasks) {
    const std::string sig = layer_signature(g, t.layer);
    auto& sc = by_sig[sig];
    if (sc.signature.empty()) {
      sc.signature = sig;
      sc.type = layer_type_name(g.layers[t.layer].type());
    }
    // Each layer listed once under its signature (a set: a search of the list was quadratic when
    // 10^5 layers share one, 9 s to profile them).
    if (listed.insert({sig, t.layer}).second) sc.layers.push_back(g.layers[t.layer].name());
    const TaskKind op = t.kind;
    if (!seen.insert({sig, task_kind_name(op)}).second) continue;
    const GraphLayer& l = g.layers[t.layer];
    const double per_sample = std::max(1.0, l.forward_flops + 4.0 * static_cast<double>(l.out.elems()));
    std::vector<std::int64_t> sizes = op == TaskKind::Update ? std::vector<std::int64_t>{0} : p.sizes;
    for (auto b : sizes)
      for (const auto& algo : runner.algorithms(g, t.layer, op))
        jobs.push_back({t.layer, sig, op, algo, b, per_sample * static_cast<double>(std::max<std::int64_t>(b, 1))});
  }

  // A model device's costs are computed, in microseconds, from formulas that change with the
  // code: a cache of them saves nothing and would keep a changed model's old answers (its key
  // names the device and library versions, not the formulas). Only measurements are cached.
  MeasurementCache cache(p.measured() ? o.cache_dir : "", p.device, p.source);
  double total_work = 0, done_work = 0;
  for (const auto& j : jobs) total_work += j.work;
  const auto start = std::chrono::steady_clock::now();
  std::size_t measured = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    const std::string key =
        fmt::format("{}|{}|{}|{}|r{}", j.signature, task_kind_name(j.op), j.algo, j.batch, o.repeat);
    OpCost c;
    if (const OpCost* hit = cache.find(key)) {
      c = *hit;
    } else {
      if (o.progress) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::string eta =
            done_work > 0 && elapsed > 0.5 ? format_seconds(elapsed * (total_work - done_work) / done_work) : "?";
        std::fprintf(stderr, "\r\033[K[%zu/%zu] %s %s b=%lld %s  (time left ~%s)", i + 1, jobs.size(),
                     g.layers[j.layer].name().c_str(), task_kind_name(j.op), static_cast<long long>(j.batch),
                     j.algo.c_str(), eta.c_str());
        std::fflush(stderr);
      }
      Measurement m = runner.measure(g, j.layer, j.op, j.algo, j.batch, o.repeat);
      c.op = step_op_of(j.op);
      c.algo = j.algo;
      c.batch = j.batch;
      c.status = m.status;
      c.seconds = m.seconds;
      c.spread = m.spread;
      c.workspace_bytes = m.workspace_bytes;
      bool too_long = false;
      if (c.ok() && c.seconds > kMaxOpSeconds) {  // a huge layer at a large micro-batch, modelled or measured
        c.status =
            fmt::format("failed: {:.0f} s, more than the {:g} s a profile holds for one op", c.seconds, kMaxOpSeconds);
        c.seconds = c.spread = 0;
        too_long = true;
      }
      // What the device says of the op itself is kept; out of memory and the runner's failures
      // depend on what else held the memory or the device then, and are measured again next time
      // (one profile under a memory limit marked six convolutions out of memory for good).
      if (c.ok() || c.status == "unsupported" || too_long) cache.put(key, c);
      ++measured;
    }
    done_work += j.work;
    by_sig[j.signature].costs.push_back(c);
  }
  if (o.progress) {
    std::fprintf(
        stderr, "\r\033[K%zu measurements (%d from the cache) in %s\n", jobs.size(), cache.hits(),
        format_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()).c_str());
  }
  cache.save();

  std::vector<std::int64_t> tsizes;
  for (std::int64_t b = 4096; b <= (64LL << 20); b *= 4) tsizes.push_back(b);
  p.h2d = fit_transfers(runner.measure_transfers(true, tsizes));
  p.d2h = fit_transfers(runner.measure_transfers(false, tsizes));
  p.duplex = runner.measure_duplex();
  for (auto& [k, v] : runner.conditions()) p.device.versions[k] = v;
  for (auto& [sig, sc] : by_sig) p.signatures.push_back(std::move(sc));
  canonicalize(p);
  return p;
}

std::int64_t micro_batch_misalignment(std::int64_t per_sample_bytes) {
  const std::int64_t a = std::gcd(per_sample_bytes, std::int64_t{256});
  return a == 256 || per_sample_bytes == 0 ? 0 : a;
}

}  // namespace ucplan
