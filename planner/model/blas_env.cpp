#include "planner/model/blas_env.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace ucplan {
namespace {

// Set by the process that re-executes itself, so that a re-executed process never tries again
// (a platform where re-executing loops, an OpenBLAS that still ignores the variables).
constexpr const char* kGuard = "UCPLAN_BLAS_REEXECUTED";
constexpr std::size_t kHeadroomBytes = 256u << 20;
constexpr int kOpenBlasMaxThreads = 64;  // Debian's build: MAX_THREADS=64

// The worker threads OpenBLAS starts: one per core this process may run on, the main one aside.
int blas_workers() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp(cores, 1, kOpenBlasMaxThreads) - 1;
}

std::size_t address_space_in_use() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) * 1024;
  return 0;
}

}  // namespace

void ensure_blas_environment(char** argv, const char* core_type) {
  if (argv == nullptr || argv[0] == nullptr || std::getenv(kGuard) != nullptr) return;
  bool again = false;
  if (core_type != nullptr && std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    if (::setenv("OPENBLAS_CORETYPE", core_type, 1) != 0) return;
    again = true;
  }
  rlimit limit{};
  const int workers = blas_workers();
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr && workers > 0 && ::getrlimit(RLIMIT_AS, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY &&
      limit.rlim_cur < address_space_in_use() + static_cast<std::size_t>(workers) * kBlasBufferBytes + kHeadroomBytes) {
    if (::setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) return;
    std::fprintf(stderr,
                 "ucplan: note: the address-space limit (ulimit -v %llu KiB) has no room for OpenBLAS's %d worker "
                 "thread%s (%zu MiB each): running on one thread\n",
                 static_cast<unsigned long long>(limit.rlim_cur / 1024), workers, workers == 1 ? "" : "s",
                 kBlasBufferBytes >> 20);
    again = true;
  }
  if (!again || ::setenv(kGuard, "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // execv only returns on failure: go on as loaded. The variables stay set, which keeps child
  // processes from trying again.
}

}  // namespace ucplan
