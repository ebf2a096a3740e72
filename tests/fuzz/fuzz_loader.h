// Shared by the libFuzzer harnesses of the three loaders (network, profile, plan): the input
// bytes become a file (the loaders read files, as the CLI does), and any outcome but a value or
// a UserError is a finding: another exception escapes (the CLI would abort with exit 134), or a
// crash or sanitizer report stops the fuzzer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "planner/model/errors.h"

namespace ucplan::fuzz {

// One file per process, rewritten for every input and removed at exit.
inline const std::string& input_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/ucplan-fuzz-" + std::to_string(::getpid()) + ".json";
  }();
  return path;
}

inline void remove_input() { std::remove(input_path().c_str()); }

template <class Load>
int run_loader(const std::uint8_t* data, std::size_t size, Load load) {
  // The file goes when the fuzzer exits (registered after the path is made, so it runs before
  // the path's destructor).
  [[maybe_unused]] static const bool removed_at_exit = (input_path(), std::atexit(remove_input) == 0);
  std::FILE* f = std::fopen(input_path().c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    load(input_path());
  } catch (const UserError& e) {
    const std::string line = e.what();
    if (line.find('\n') != std::string::npos) std::abort();  // an error is one line, always
  }
  return 0;
}

}  // namespace ucplan::fuzz
