// Views of a plan's timeline for people: a Chrome trace (opens in Perfetto or chrome://tracing)
// with one track per stream and a counter track of arena bytes in use, and an SVG plot of memory
// over one round (like SuperNeurons Fig. 10). The executor passes its measured step times to
// get the same views of what really happened.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/plan.h"

namespace ucplan {

struct MeasuredStep {
  int step = -1;
  int round = 0;              // -1 for final steps
  std::int64_t start_ns = 0;  // from the start of the iteration
  std::int64_t end_ns = 0;
  std::int64_t bytes = 0;  // copies: the bytes moved (a trace's args.bytes, what `ucplan calibrate` fits)
};

// The device a measured timeline ran on, as a profile names its device (Profile::device): kind
// "cpu" or "cuda", and its name. A measured trace records it in otherData.device, so that
// `ucplan calibrate` refits a profile only from runs on the profile's own device.
struct RunDevice {
  std::string kind, name;
};

// Predicted (measured == nullptr): every round laid end to end, then the final steps; at most
// `max_rounds` rounds are drawn (the rest are identical).
std::string chrome_trace(const Plan& plan, const std::vector<MeasuredStep>* measured = nullptr,
                         const RunDevice* ran_on = nullptr, int max_rounds = 4);

// Arena bytes in use over one predicted round, with the budget and the lower bound.
std::string memory_svg(const Plan& plan);
// Text (network, strategy names) for SVG/XML markup: the five special characters as entities,
// control characters XML 1.0 forbids as '?'.
std::string xml_escape(const std::string& text);

// Bytes in use over one round: (time, bytes) points of a step function, time-ordered.
std::vector<std::pair<std::int64_t, std::int64_t>> memory_profile(const Plan& plan);
// The most bytes in use at once (the trace's and SVG's peak). The plan's peak is the arena, the
// highest end of any buffer: larger by the gaps between buffers (fragmentation).
std::int64_t max_bytes_in_use(const Plan& plan);
// What the iteration's compute waits before each round's first layer, in all rounds: the copy of
// the round's batch to the device (a plan replays one iteration at a time, so no plan overlaps it
// with the previous iteration's work, and the ideal leaves it out).
std::int64_t first_layer_wait_ns(const Plan& plan);

}  // namespace ucplan
