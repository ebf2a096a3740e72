// A device the profiler can measure one op on: the CPU backend, the CUDA backend, or an
// analytic model device (which answers with modelled numbers and says so: its profile's source
// is "model:NAME"). profile_network() (profile_network.h) drives a Runner over every
// signature x op x micro-batch size x algorithm; a Runner only knows how to cost one op.
//
// Ops are task kinds (planner/ir/tasks.h; a profile's `op` field holds their names), by layer type:
//   conv, fc:  forward, backward_data, backward_filter   (+ update, batch 0, algo "sgd")
//   bn:        forward, backward                         (+ update)
//   others:    forward, backward
// Non-conv ops have the single algorithm "default". Conv algorithm names are the backend's:
//   cpu:  direct, gemm, gemm_lift
//   cuda/model, forward:          implicit_gemm, implicit_precomp_gemm, gemm, direct, fft,
//                                 fft_tiling, winograd, winograd_nonfused
//   cuda/model, backward_data:    algo_0, algo_1, fft, fft_tiling, winograd, winograd_nonfused
//   cuda/model, backward_filter:  algo_0, algo_1, fft, algo_3, winograd_nonfused, fft_tiling
//   (cuDNN's enum suffixes in lower case: CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING -> fft_tiling)
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/ir/graph.h"
#include "planner/ir/tasks.h"
#include "planner/model/profile.h"

namespace ucplan {

struct Measurement {
  std::string status = "ok";  // ok | unsupported | out_of_memory | failed: REASON
  double seconds = 0;         // median of the timed repeats
  double spread = 0;          // (max - min) / median
  std::int64_t workspace_bytes = 0;
};

// A failure after which the device cannot measure anything (a sticky CUDA error such as an
// illegal address): measure() throws it, naming the measurement, and profiling stops without
// writing a profile, instead of recording every later measurement as failed.
class DeviceFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // kind "cpu" | "cuda" | "model"; versions filled; for a model the datasheet numbers.
  virtual DeviceInfo device() = 0;
  // "measured" for real devices, "model:NAME" for analytic ones.
  virtual std::string source() const = 0;
  // Algorithms to try for (layer, op): conv: the backend's list; others: {"default"};
  // update: {"sgd"}.
  virtual std::vector<std::string> algorithms(const Graph& g, int layer, TaskKind op) = 0;
  // Cost of one op of `layer` on a micro-batch of `batch` samples (batch 0 for update):
  // warm-up runs, then `repeats` timed samples. Failures come back as a status; only a failure
  // that leaves the device unusable throws (DeviceFailure).
  virtual Measurement measure(const Graph& g, int layer, TaskKind op, const std::string& algo, std::int64_t batch,
                              int repeats) = 0;
  // Pinned host<->device copies at the given sizes, and whether both directions overlap.
  virtual std::vector<TransferPoint> measure_transfers(bool host_to_device, const std::vector<std::int64_t>& sizes) = 0;
  virtual bool measure_duplex() = 0;
  // Facts known once the measurements are done, added to the profile's device.versions (not to
  // the measurement cache's key): how times were taken, clocks, power and temperature while
  // measuring, device memory the runtime and libraries took (device_overhead_bytes), ...
  virtual std::map<std::string, std::string> conditions() { return {}; }
};

}  // namespace ucplan
