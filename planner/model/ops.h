// The ops of a training iteration and the streams they run on: enums everywhere inside,
// names only in files (plans, profiles, the measurement cache) and in messages.
#pragma once

#include <string>

namespace ucplan {

enum class Stream { Compute, H2D, D2H };
// A layer's compute ops (what a profile costs: forward, backward or its data and filter halves,
// update), a recomputation of its forward, and the copies between the arena and host memory.
enum class StepOp { Forward, Recompute, Backward, BackwardData, BackwardFilter, Update, Offload, Prefetch };
constexpr int kStreams = 3;
const char* stream_name(Stream s);   // "compute", "h2d", "d2h"
const char* step_op_name(StepOp o);  // "forward", "recompute", ..., "prefetch"
bool parse_stream(const std::string& name, Stream* out);
bool parse_step_op(const std::string& name, StepOp* out);
// Copies move a tensor between the arena and a host buffer; every other op is a compute kernel.
inline bool is_copy(StepOp o) { return o == StepOp::Offload || o == StepOp::Prefetch; }

}  // namespace ucplan
