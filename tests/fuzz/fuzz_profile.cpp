// libFuzzer harness: the profile loader, then the planner with what it loaded. A profile of
// chain3 (tests/data/chain3.json, the network of the seed corpus's profiles) is also compiled at
// a budget with room and at a tight one: the planner and its checker must agree on what a
// profile allows, and a cost the checker would refuse must be refused as bad input (UserError),
// not found by the checker at the end of the compile (an abort). Mutating profiles and compiling
// them found four such costs in the thirtieth session; loading alone had found none.
#include "planner/model/network.h"
#include "planner/model/profile.h"
#include "planner/passes/pipeline.h"
#include "tests/fuzz/fuzz_loader.h"

namespace {

const ucplan::Network& chain3() {
  static const ucplan::Network net = ucplan::load_network(UCPLAN_SOURCE_DIR "/tests/data/chain3.json");
  return net;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ucplan::fuzz::run_loader(data, size, [](const std::string& path) {
    const ucplan::Profile p = ucplan::load_profile(path);
    if (p.network != chain3().name) return;
    for (const std::int64_t budget : {std::int64_t{1} << 30, std::int64_t{8} << 10}) {
      ucplan::CompileInput in;
      in.network = chain3();
      in.network_file = "chain3.json";
      in.profile = p;
      in.profile_path = path;
      in.budget_bytes = budget;
      in.precision = p.precision;
      try {
        ucplan::make_plan(in);
      } catch (const ucplan::UserError&) {
        // bad input, refused: what this harness looks for is any other outcome
      }
    }
  });
}
