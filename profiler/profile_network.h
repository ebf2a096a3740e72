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
  std::string sizes = "powerOfTwo";
  int repeat = 5;
  std::string cache_dir;           // "" for none
  bool progress = false;           // progress with an estimate of the time left on stderr
};

Profile profile_network(const Network& net, const std::string& file, Runner& runner, const ProfileOptions& o);

// Least-squares fit t = latency + bytes / bandwidth over the points (latency clamped at 0).
TransferCosts fit_transfers(const std::vector<TransferPoint>& points);

// Median and (max - min) / median of repeated timings.
void median_and_spread(std::vector<double> seconds, double* median, double* spread);

}  // namespace ucplan
