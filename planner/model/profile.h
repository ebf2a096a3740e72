// A profile (`ucplan-profile/1`): measured or modelled costs of one network's kernels on one
// device. `source` is "measured" or "model:NAME" and is shown wherever the numbers are; the two
// are never mixed in one file. Costs are keyed by layer signature (graph.h), so repeated layers
// are measured once; per signature, per op, per micro-batch size, per algorithm: median
// seconds, spread and workspace bytes. An algorithm that failed or ran out of memory is kept
// with its status, not dropped. Transfers: host<->device over pinned memory, a latency +
// bandwidth fit of measured points, and whether both directions overlap (duplex).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops.h"
#include "precision.h"

namespace ucplan {

// The longest one op may take in a profile (the loader refuses more; the profiler records such an
// op as failed, so that what it writes always reads back).
constexpr double kMaxOpSeconds = 1e3;

struct OpCost {
  StepOp op = StepOp::Forward;  // Forward, Backward, BackwardData, BackwardFilter or Update
  std::string algo;             // conv: algorithm name; others: "default"
  std::int64_t batch = 0;       // micro-batch size; 0 for update (independent of the batch)
  std::string status = "ok";    // ok | unsupported | out_of_memory | failed: REASON
  double seconds = 0;           // median over repeats (status ok only)
  double spread = 0;            // (max - min) / median over repeats
  std::int64_t workspace_bytes = 0;
  bool ok() const { return status == "ok"; }
};

struct SignatureCosts {
  std::string signature;
  std::string type;                 // layer type name
  std::vector<std::string> layers;  // the network's layers with this signature
  std::vector<OpCost> costs;
};

struct TransferPoint {
  std::int64_t bytes = 0;
  double seconds = 0;
};

// A fit refit in place by `ucplan calibrate` from the copies of measured runs (`ucplan run
// --trace`): the plan's own copies beside its own kernels, which the profiler's copies alone do not
// see (a device-to-host copy beside memory-bound kernels ran at 50 instead of 55 GB/s on an H100).
struct TransferCalibration {
  int traces = 0;                    // measured traces the copies came from
  int copies = 0;                    // copies fitted (the fit's points)
  int overlapped = 0;                // copies left out: a copy the other way ran beside them more than half their time
  double bench_latency_seconds = 0;  // the profiler's own fit, which the calibration replaced
  double bench_bytes_per_second = 0;
};

struct TransferCosts {
  double latency_seconds = 0;
  double bytes_per_second = 0;
  std::vector<TransferPoint> points;               // what the fit was made from
  std::optional<TransferCalibration> calibration;  // refit from measured runs (`ucplan calibrate`)
  double seconds(std::int64_t bytes) const;
};

// Least-squares fit t = latency + bytes / bandwidth over the points (at least two, of two sizes or
// more); where the intercept comes out negative, the fit through the origin (latency 0).
TransferCosts fit_transfers(const std::vector<TransferPoint>& points);

// The compute stream's idle time between one kernel and the next when neither waits for anything
// (a copy, an event, memory), which the profiler's timings (one kernel run back to back, many
// times) do not show. `ucplan calibrate` fits it from measured runs (`ucplan run --trace`): on an
// H100 about 1.25 us a kernel, 6 % of ResNet-20 b64's iteration (gpu_results.py part N).
// The cost table adds it to every kernel a task launches (costs.cpp), so recomputing a step costs
// its gap too. Absent in profiles that were not calibrated with it: no gap.
struct LaunchGap {
  static constexpr double kMaxSeconds = 1e-3;  // a millisecond between two kernels is a stall, not a launch
  double seconds = 0;                          // per kernel, at most kMaxSeconds
  int traces = 0;                              // measured traces it was fitted from
  int gaps = 0;                                // gaps between consecutive compute kernels it was fitted from
};

struct DeviceInfo {
  std::string kind;                             // cpu | cuda | model
  std::string name;                             // "AMD EPYC (2 threads)", "NVIDIA H100 80GB HBM3", "model k40"
  std::int64_t memory_bytes = 0;                // device memory (0 if unknown)
  double peak_flops = 0;                        // FP32 FLOP/s: datasheet (model) or measured sgemm (cpu)
  std::map<std::string, std::string> versions;  // ucplan, openblas, cuda, cudnn, driver ...
};

// mu-cuDNN §III-B micro-batch size policies: which sizes a profile measures, and which a plan's
// conv kernels may split their sub-batch into.
enum class SizesPolicy {
  All,         // 1, 2, ..., batch
  PowerOfTwo,  // 1, 2, 4, ..., and the batch itself
  Undivided,   // the batch only
};
const char* sizes_policy_name(SizesPolicy p);  // all | powerOfTwo | undivided, the files' vocabulary
std::optional<SizesPolicy> parse_sizes_policy(const std::string& text);

struct Profile {
  std::string source;  // "measured" | "model:NAME"
  std::string date;    // measured profiles: UTC date; empty for models (reproducible)
  DeviceInfo device;
  std::string network;         // network name
  std::string network_sha256;  // of the canonical network text
  std::int64_t batch = 0;
  Precision precision = Precision::FP32;  // of every kernel measured ("precision", absent for fp32)
  SizesPolicy sizes_policy = SizesPolicy::PowerOfTwo;
  std::vector<std::int64_t> sizes;  // micro-batch sizes measured
  int repeat = 0;
  TransferCosts h2d, d2h;
  bool duplex = false;                  // host->device and device->host copies overlap
  std::optional<LaunchGap> launch_gap;  // "launch_gap", measured profiles only (`ucplan calibrate`)
  std::vector<SignatureCosts> signatures;

  bool measured() const { return source == "measured"; }
  const SignatureCosts* find(const std::string& signature) const;
};

// A CPU profile records how busy other work kept the machine's cores while it measured
// (device.versions "cpu_busy_others", in cores, from /proc/stat less the profiler's own CPU
// time; "cpu_cores"; "measured_seconds"). Where that was half a core or more, kernel times may
// be inflated (a bf16 profile on 2 cores shared with a build came out 7x too slow): this says so
// in one sentence; "" otherwise, and for profiles without those fields.
std::string shared_cpu_warning(const Profile& p);

// The sizes a profile at `batch` measures under the policy.
std::vector<std::int64_t> micro_batch_sizes(SizesPolicy policy, std::int64_t batch);

Profile load_profile(const std::string& path);
class JsonReader;
// One measurement as a profile's "costs" and the measurement cache's entries hold it, with the
// loader's bounds (batch at most `max_batch`; a time within kMaxOpSeconds, ...). The caller
// states which fields its object may have.
OpCost read_op_cost(const JsonReader& r, std::int64_t max_batch);
std::string profile_to_json_text(const Profile& p);
// Sorts signatures and costs into the canonical order (so files diff well and are stable).
void canonicalize(Profile& p);

}  // namespace ucplan
