// What a plan's conv configuration means on a device whose library disagrees with the profile
// the plan was compiled from (a modelled profile, another cuDNN, another GPU): the replay keeps
// the plan's memory layout, which the verifier proved safe, and changes only algorithms. For each
// micro-batch whose planned algorithm the device does not support, or whose workspace there
// exceeds the workspace buffer the plan gave the step, it takes the first algorithm of the
// device's own ranking (cuDNN's heuristics, fastest expected first) that fits that buffer; the
// micro-batch sizes stay. Each substitution is reported; `ucplan run --exact` refuses instead,
// naming the first one and how to re-profile. Times of a substituted plan are not the plan's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ucplan {

struct AlgoFit {
  std::string name;
  std::optional<std::int64_t> workspace;  // on this device; nullopt: not supported for these dims
};

// `planned` when it fits `given` bytes; else the first of `ranked` (the device's preference
// order, each with its workspace here) that fits; "" when none does.
std::string choose_conv_algo(const AlgoFit& planned, const std::vector<AlgoFit>& ranked, std::int64_t given);

}  // namespace ucplan
