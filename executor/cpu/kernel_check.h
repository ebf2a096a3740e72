// Invariant checks inside the CPU kernels. The kernels library does not link the planner's model
// (where UCPLAN_CHECK lives), so it has its own: a failure is a caller's bug (an unsupported
// algorithm, a label out of range), never user input, and aborts with file:line (STYLE.md #6).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace ucplan::cpu {

[[noreturn]] inline void kernel_check_failed(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "ucplan internal error at %s:%d: check '%s' failed: %s\n", file, line, expr, msg);
  std::fflush(stderr);
  std::abort();
}

}  // namespace ucplan::cpu

#define UCPLAN_KERNEL_CHECK(cond, msg)                                                 \
  do {                                                                                 \
    if (!(cond)) ::ucplan::cpu::kernel_check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
