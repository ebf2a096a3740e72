// Profiles and compile inputs for the planner and verifier tests: a modelled profile of a
// network, a CompileInput at a budget, the lower bound and the keep-all peak.
#pragma once

#include <cstdint>
#include <string>

#include "planner/ir/route.h"
#include "planner/ir/tasks.h"
#include "planner/passes/lower_bound.h"
#include "planner/passes/pipeline.h"
#include "profiler/model_device.h"
#include "profiler/profile_network.h"

namespace ucplan::test {

inline Profile model_profile(const Network& net, std::int64_t batch, const std::string& device = "k40") {
  auto runner = make_model_runner(device);
  ProfileOptions o;
  o.batch = batch;
  o.sizes = "powerOfTwo";
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
  in.strategy = strategy;
  in.sub_batch = sub_batch;
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
