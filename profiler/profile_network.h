// Profiling a network (DESIGN.md "Profile"): every distinct (layer signature, op) of the
// training iteration, at every micro-batch size of the policy (mu-cuDNN §III-B: all,
// powerOfTwo, undivided), with every algorithm the device offers, warm-up then medians over
// repeats; plus pinned host<->device transfers at sizes from KiB to MiB, fitted as latency +
// bytes / bandwidth. Repeated layers are measured once. With a cache folder, measurements are
// reused across networks, keyed by signature, op, algorithm, size and the device with its
// library versions (mu-cuDNN's database idea).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/network.h"
#include "planner/model/profile.h"
#include "runner.h"

namespace ucplan {

struct ProfileOptions {
  std::int64_t batch = 0;
  SizesPolicy sizes = SizesPolicy::PowerOfTwo;
  int repeat = 5;
  std::string cache_dir;                  // "" for none
  bool progress = false;                  // progress with an estimate of the time left on stderr
  Precision precision = Precision::FP32;  // every kernel at this precision (the graph carries it to the runner)
};

// Throws DeviceFailure (runner.h) when the device fails for good: no profile is returned.
Profile profile_network(const Network& net, const std::string& file, Runner& runner, const ProfileOptions& o);

// Replay runs a conv kernel's micro-batches on pointers offset along N (mu-cuDNN §II), so a
// micro-batch after the first starts at k x per-sample bytes from a 256-byte aligned buffer.
// The offset at which the profiler measures a micro-batch of a tensor with this many bytes a
// sample: 0 when every such offset is 256-byte aligned, else gcd(per_sample_bytes, 256), the
// worst alignment replay can give it (e.g. 4 bytes for AlexNet's 3x227x227 input), so that no
// measurement is faster than what replay runs.
std::int64_t micro_batch_misalignment(std::int64_t per_sample_bytes);

// Median and (max - min) / median of repeated timings.
void median_and_spread(std::vector<double> seconds, double* median, double* spread);

}  // namespace ucplan
