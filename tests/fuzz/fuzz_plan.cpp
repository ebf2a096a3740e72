// libFuzzer harness: the plan loader, then the verifier on whatever loads (it must answer, never
// crash, on any plan: `ucplan check` and `ucplan run` call it on files from anywhere).
#include "planner/model/plan.h"
#include "planner/check/verify.h"
#include "tests/fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ucplan::fuzz::run_loader(data, size, [](const std::string& path) {
    const ucplan::Plan plan = ucplan::load_plan(path);
    ucplan::find_plan_error(plan);
  });
}
