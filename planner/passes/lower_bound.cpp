#include "lower_bound.h"

namespace ucplan {

LowerBound memory_lower_bound(const TaskGraph& tg, std::int64_t sub_batch) {
  LowerBound lb;
  lb.sub_batch = sub_batch;
  lb.resident_bytes = tg.resident_bytes();
  for (const Task& t : tg.tasks) {
    std::int64_t bytes = 0;
    for (int id : tg.touched(t))
      if (!tg.tensors[id].resident()) bytes += tg.tensors[id].bytes(sub_batch);
    if (bytes > lb.max_task_bytes) {
      lb.max_task_bytes = bytes;
      lb.task = t.id;
    }
  }
  lb.bytes = lb.resident_bytes + lb.max_task_bytes;
  return lb;
}

}  // namespace ucplan
