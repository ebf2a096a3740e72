#include "lower_bound.h"

#include "simulator.h"

namespace ucplan {

LowerBound memory_lower_bound(const TaskGraph& tg, std::int64_t sub_batch) {
  LowerBound lb;
  lb.sub_batch = sub_batch;
  for (const Tensor& t : tg.tensors)
    if (t.resident()) lb.resident_bytes += align_up(t.bytes(1));
  for (const Task& t : tg.tasks) {
    std::int64_t bytes = 0;
    for (int id : tg.touched(t))
      if (!tg.tensors[id].resident()) bytes += align_up(std::max<std::int64_t>(1, tg.tensors[id].bytes(sub_batch)));
    if (bytes > lb.max_task_bytes) {
      lb.max_task_bytes = bytes;
      lb.task = t.id;
    }
  }
  lb.bytes = lb.resident_bytes + lb.max_task_bytes;
  return lb;
}

}  // namespace ucplan
