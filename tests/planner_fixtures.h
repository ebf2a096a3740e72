// Profiles and compile inputs for the planner, verifier, precision and mutator tests: a CPU
// profile with deterministic times, a modelled profile, a CompileInput at a budget, the lower
// bound and the keep-all peak.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "planner/ir/route.h"
#include "planner/ir/tasks.h"
#include "planner/passes/lower_bound.h"
#include "planner/passes/pipeline.h"
#include "profiler/cpu_runner.h"
#include "profiler/model_device.h"
#include "profiler/profile_network.h"

#if defined(__SANITIZE_ADDRESS__)
#define UCPLAN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UCPLAN_TEST_SANITIZED 1
#endif
#endif

namespace ucplan::test {

// Built with AddressSanitizer (scripts/sanitize.sh), where a compile is ten times slower and what
// the suite looks for is memory errors: tests that compile on a grid of budgets take every second
// budget of it there. The Release suite runs the whole grid.
#ifdef UCPLAN_TEST_SANITIZED
inline constexpr int kGridStride = 2;
#else
inline constexpr int kGridStride = 1;
#endif

// splitmix64, the hash of the deterministic profile times.
inline std::uint64_t profile_mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The CPU runner without its copy measurements, for deterministic_cpu_profile, which replaces
// every time anyway: measuring the copies moves 64 MiB buffers a dozen times, most of a test's
// run time under the sanitizers.
class CpuKernelsOnlyRunner : public Runner {
 public:
  DeviceInfo device() override { return cpu_->device(); }
  std::string source() const override { return cpu_->source(); }
  std::vector<std::string> algorithms(const Graph& g, int layer, TaskKind op) override {
    return cpu_->algorithms(g, layer, op);
  }
  Measurement measure(const Graph& g, int layer, TaskKind op, const std::string& algo, std::int64_t batch,
                      int repeats) override {
    return cpu_->measure(g, layer, op, algo, batch, repeats);
  }
  std::vector<TransferPoint> measure_transfers(bool, const std::vector<std::int64_t>& sizes) override {
    std::vector<TransferPoint> out;
    for (std::int64_t bytes : sizes) out.push_back({bytes, 2e-6 + static_cast<double>(bytes) / 4e9});
    return out;
  }
  bool measure_duplex() override { return true; }
  std::map<std::string, std::string> conditions() override { return cpu_->conditions(); }

 private:
  std::unique_ptr<Runner> cpu_ = make_cpu_runner();
};

// A measured CPU profile (so plans use the CPU algorithms, and the verifier's exact CPU
// workspace rules apply) with its times replaced by a deterministic function of the entry: the
// plans must not depend on how loaded the machine is.
inline Profile deterministic_cpu_profile(const Network& net, std::int64_t batch,
                                         Precision precision = Precision::FP32) {
  CpuKernelsOnlyRunner runner;
  ProfileOptions o;
  o.batch = batch;
  o.repeat = 1;
  o.precision = precision;
  Profile p = profile_network(net, "test", runner, o);
  for (SignatureCosts& s : p.signatures)
    for (OpCost& c : s.costs) {
      std::uint64_t h = 0;
      for (char ch : s.signature + step_op_name(c.op) + c.algo) h = profile_mix(h ^ static_cast<unsigned char>(ch));
      h = profile_mix(h ^ static_cast<std::uint64_t>(c.batch));
      c.seconds =
          1e-5 * static_cast<double>(std::max<std::int64_t>(c.batch, 1)) * (1.0 + static_cast<double>(h % 64) / 16.0);
      c.spread = 0;
    }
  p.h2d = TransferCosts{2e-6, 4e9, {}, {}};
  p.d2h = TransferCosts{2e-6, 4e9, {}, {}};
  p.duplex = true;
  // How loaded the machine was while measuring (cpu_runner.cpp): it would add a note to some
  // plans and not others.
  for (const char* load : {"cpu_busy_others", "cpu_cores", "measured_seconds"}) p.device.versions.erase(load);
  return p;
}

inline Profile model_profile(const Network& net, std::int64_t batch, const std::string& device = "k40") {
  auto runner = make_model_runner(device);
  ProfileOptions o;
  o.batch = batch;
  o.sizes = SizesPolicy::PowerOfTwo;
  o.repeat = 1;
  return profile_network(net, "test", *runner, o);
}

inline CompileInput input_for(const Network& net, const Profile& prof, std::int64_t budget,
                              const std::string& strategy = "ucplan", const std::string& sub_batch = "any") {
  CompileInput in;
  in.network = net;
  in.network_file = "test";
  in.profile = prof;
  in.profile_path = "test-profile.json";
  in.profile_sha256 = "0";
  in.budget_bytes = budget;
  in.options.strategy = strategy;
  in.options.sub_batch = parse_sub_batch_option(sub_batch);
  in.precision = prof.precision;  // a plan at the profile's precision
  return in;
}

inline std::int64_t lower_bound_of(const Network& net) {
  const Graph g = build_graph(net, "test");
  return memory_lower_bound(build_tasks(g, construct_route(g)), 1).bytes;
}

// The peak of keeping everything (liveness analysis only), with a generous budget.
inline std::int64_t keep_all_peak(const Network& net, const Profile& prof) {
  return make_plan(input_for(net, prof, std::int64_t{1} << 40, "keep-all", "auto")).plan.summary.peak_bytes;
}

}  // namespace ucplan::test
