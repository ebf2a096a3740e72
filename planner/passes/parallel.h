// Independent pieces of a search on the machine's cores. Every caller gives each index its own
// output and merges the outputs in index order afterwards, so what it computes does not depend
// on the threads or their timing (plans stay byte-identical, DESIGN.md "Determinism").
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ucplan {

// The cores this process may run on (its CPU affinity, as nproc counts them; taskset and
// container CPU sets lower it), at least 1. std::thread::hardware_concurrency counts the machine's.
inline unsigned usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Runs fn(0) ... fn(n - 1), each once, on up to as many threads as this process has cores
// (usable_cores), this one among them. The first exception any call throws is rethrown here once
// every thread has been joined; the indices not yet started then are not run. Calls may nest (a
// search inside a search): the inner calls start threads of their own, and the cores are shared.
template <class Fn>
void parallel_for(std::size_t n, Fn&& fn) {
  if (n == 0) return;
  const std::size_t threads = std::clamp<std::size_t>(usable_cores(), 1, n);
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    for (std::size_t i; (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t k = 0; k + 1 < threads; ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ucplan
