// OpenBLAS set-up and description (see blas.h for why the core type needs a re-exec).
#include "executor/cpu/blas.h"

#include <cblas.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace ucplan::cpu {
const char* blas_core_type_for_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2")) return "Haswell";
  return nullptr;
}

std::string blas_version() {
  // openblas_get_config() reads e.g. "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64".
  std::istringstream config(openblas_get_config());
  std::string name, version;
  config >> name >> version;
  return version;
}

std::string blas_description() {
  const int threads = blas_threads();
  return fmt::format("OpenBLAS {} ({}, {} thread{})", blas_version(), openblas_get_corename(), threads,
                     threads == 1 ? "" : "s");
}

int blas_threads() { return openblas_get_num_threads(); }

std::string prepare_blas(std::size_t buffer_bytes) {
  const int threads = std::max(blas_threads(), 1);
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    // Reserved, not touched: the limit counts address space, as OpenBLAS's mmap does.
    const std::size_t need = static_cast<std::size_t>(threads) * buffer_bytes;
    void* room = ::mmap(nullptr, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (room == MAP_FAILED)
      return fmt::format(
          "the address-space limit (ulimit -v {} KiB) leaves no room for OpenBLAS's work buffer{} ({} x {} MiB), "
          "and OpenBLAS would wait for {} forever: raise the limit",
          limit.rlim_cur / 1024, threads == 1 ? "" : "s", threads, buffer_bytes >> 20, threads == 1 ? "it" : "them");
    ::munmap(room, need);
  }
  // A product large enough to run on every thread, so that each takes its buffer now, before the
  // program's own allocations (a plan's arena) can leave it none.
  constexpr int n = 256;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  return "";
}

std::string cpu_device_name() {
  std::string model = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      if (const auto colon = line.find(':'); colon != std::string::npos && colon + 2 <= line.size()) {
        model = line.substr(colon + 2);
        break;
      }
    }
  return fmt::format("{} ({} threads)", model, blas_threads());
}

double measure_sgemm_gflops(int n, int repeats) {
  const auto size = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  // Values that stay finite and away from denormals however often the product is repeated.
  std::vector<float> a(size), b(size), c(size);
  for (std::size_t i = 0; i < size; ++i) {
    a[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
    b[i] = static_cast<float>(i % 5) * 0.25f - 0.5f;
  }
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  };
  run();  // warm-up: thread start-up and first-touch page faults
  std::vector<double> seconds;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const std::size_t mid = seconds.size() / 2;
  const double median = seconds.size() % 2 == 1 ? seconds[mid] : (seconds[mid - 1] + seconds[mid]) / 2;
  return 2.0 * n * static_cast<double>(n) * n / median * 1e-9;
}

}  // namespace ucplan::cpu
