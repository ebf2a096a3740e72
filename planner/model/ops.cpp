#include "ops.h"

#include <iterator>

namespace ucplan {

namespace {
constexpr const char* kStreamNames[] = {"compute", "h2d", "d2h"};
constexpr const char* kStepOpNames[] = {"forward",         "recompute", "backward", "backward_data",
                                        "backward_filter", "update",    "offload",  "prefetch"};
}  // namespace

const char* stream_name(Stream s) { return kStreamNames[static_cast<int>(s)]; }
const char* step_op_name(StepOp o) { return kStepOpNames[static_cast<int>(o)]; }

bool parse_stream(const std::string& name, Stream* out) {
  for (int i = 0; i < kStreams; ++i)
    if (name == kStreamNames[i]) {
      *out = static_cast<Stream>(i);
      return true;
    }
  return false;
}

bool parse_step_op(const std::string& name, StepOp* out) {
  for (int i = 0; i < static_cast<int>(std::size(kStepOpNames)); ++i)
    if (name == kStepOpNames[i]) {
      *out = static_cast<StepOp>(i);
      return true;
    }
  return false;
}

}  // namespace ucplan
