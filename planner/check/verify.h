// The plan checker (DESIGN.md pass 7; STYLE.md #5): independent code that re-simulates a
// finished plan from the plan alone. It rebuilds the task list from the embedded network (in the
// plan's own forward order), derives happens-before from stream order and waits (vector clocks),
// and replays every step with versioned buffer contents:
//  - every wait names an earlier step on another stream; buffers lie inside the arena (checked
//    without overflow) and start on 256 bytes, the arena inside the budget;
//  - every convolution step runs the micro-configuration the kernels list states for it, the
//    micro-batches add up to the sub-batch (on cuDNN each starting 4-byte aligned in its operands,
//    cudnn_micro_batch_granule), every algorithm is one of the plan's device family
//    (CPU: direct, gemm, gemm_lift; else cuDNN's names per op) and, for the CPU, supports the
//    shape; its workspace buffer holds what the configuration needs (CPU: computed exactly from
//    the shape; cuDNN: the kernels list's measured bytes, which the CUDA executor checks against
//    cuDNN before it runs);
//  - host buffers keep their roles: input buffers (the whole batch) are only read by prefetches;
//  - two buffers that share bytes are never live at once: every access of the earlier happens
//    before the first access of the later;
//  - every read finds the current value of its tensor, written by a step that happens before it
//    (a missing prefetch, a read after free or of stale data are all caught here);
//  - a write waits for every earlier access of its buffer (no write-after-read race with a copy);
//  - the compute steps are exactly the training iteration's tasks, each after its inputs exist;
//  - the predicted start/end times follow from stream order, waits and durations, and the
//    summary (round time, iteration time, peak) agrees with the steps.
#pragma once

#include <cstdint>
#include <string>

#include "planner/model/plan.h"

namespace ucplan {

// "" when the plan is valid, else one line saying which step or buffer is wrong and why.
std::string find_plan_error(const Plan& plan);
// The part of the rules a replay needs to stay memory-safe, for `run --no-verify`, which replays
// plans the verifier refuses to show what the poison check catches: "" when every step's accesses
// stay inside buffers of the sizes its kernel needs (the structure, the kernels' operands and
// configurations, host buffers of their tensors' sizes), else why not. *schedule_error gets the
// first error find_plan_error would report beyond these (lifetimes, versions, waits, task order,
// predicted times, stated totals), or "".
std::string find_unsafe_plan_error(const Plan& plan, std::string* schedule_error);

struct GraphLayer;
// The checker's rules for one convolution cost, as the planner can ask them of a profile before
// planning with it: "" when `algo` is an algorithm of the profile's device family for `op` (cuDNN's
// names per op, or the CPU's) and, on the CPU (`cpu`), supports the layer and has in
// `workspace_bytes` what it needs for `batch` samples; else what is wrong. A plan made from a cost
// that breaks them would fail this checker (a profile or --cache file edited by hand).
std::string conv_cost_error(const GraphLayer& l, bool cpu, StepOp op, const std::string& algo, std::int64_t batch,
                            std::int64_t workspace_bytes);
// cuDNN needs every tensor pointer 4-byte aligned, 16-bit data included (cuDNN's documented
// floor; FP32 always meets it). A micro-batch starting `k` samples into a convolution's operand of
// b bytes a sample starts at k x b bytes, so with an odd number of 16-bit values a sample (AlexNet's
// 3x227x227 input) only even k are aligned. The granule of convolution `layer` of `g`: the
// micro-batches of a cuDNN plan start at multiples of it (1, 2 or 4 samples; its input and output,
// and their gradients).
struct Graph;
std::int64_t cudnn_micro_batch_granule(const Graph& g, int layer);

}  // namespace ucplan
