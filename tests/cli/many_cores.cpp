// LD_PRELOAD this library and a process sees 16 cores (sched_getaffinity, which usable_cores in
// planner/passes/parallel.h reads, as nproc does), whatever the machine has: tests/cli/cores.py
// compiles with more threads than a CI machine's cores this way.
#include <sched.h>

#include <cstring>

extern "C" int sched_getaffinity(pid_t, size_t size, cpu_set_t* set) {
  std::memset(set, 0, size);
  for (int cpu = 0; cpu < 16; ++cpu) CPU_SET_S(cpu, size, set);
  return 0;
}
