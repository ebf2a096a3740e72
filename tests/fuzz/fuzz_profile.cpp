// libFuzzer harness: the profile loader.
#include "planner/model/profile.h"
#include "tests/fuzz/fuzz_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ucplan::fuzz::run_loader(data, size, [](const std::string& path) { ucplan::load_profile(path); });
}
