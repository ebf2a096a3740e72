#include "liveness.h"

#include <algorithm>

namespace ucplan {

std::vector<int> Liveness::in_set(int step) const {
  std::vector<int> s;
  for (std::size_t t = 0; t < first_step.size(); ++t)
    if (first_step[t] >= 0 && first_step[t] < step && last_step[t] >= step) s.push_back(static_cast<int>(t));
  return s;
}

std::vector<int> Liveness::out_set(int step) const {
  std::vector<int> s;
  for (std::size_t t = 0; t < first_step.size(); ++t)
    if (first_step[t] >= 0 && first_step[t] <= step && last_step[t] > step) s.push_back(static_cast<int>(t));
  return s;
}

Liveness compute_liveness(const TaskGraph& tg, std::int64_t batch) {
  Liveness lv;
  lv.batch = batch;
  for (const auto& t : tg.tasks)
    if (t.round_task) lv.steps.push_back(t.id);
  const int nt = static_cast<int>(tg.tensors.size());
  const int ns = static_cast<int>(lv.steps.size());
  lv.first_step.assign(nt, -1);
  lv.last_step.assign(nt, -1);
  for (int s = 0; s < ns; ++s) {
    const Task& task = tg.tasks[lv.steps[s]];
    for (int id : tg.touched(task)) {
      if (tg.tensors[id].resident()) continue;
      if (lv.first_step[id] < 0) lv.first_step[id] = s;
      lv.last_step[id] = s;
    }
  }
  lv.resident_bytes = tg.resident_bytes();
  // Sweep with a difference array: +bytes at first step, -bytes after the last.
  std::vector<std::int64_t> delta(ns + 1, 0);
  std::vector<int> count_delta(ns + 1, 0);
  lv.baseline_peak = lv.resident_bytes;
  for (int id = 0; id < nt; ++id) {
    if (lv.first_step[id] < 0) continue;
    std::int64_t b = tg.tensors[id].bytes(batch);
    lv.baseline_peak += b;
    delta[lv.first_step[id]] += b;
    delta[lv.last_step[id] + 1] -= b;
    count_delta[lv.first_step[id]] += 1;
    count_delta[lv.last_step[id] + 1] -= 1;
  }
  lv.live_bytes.resize(ns);
  lv.live_count.resize(ns);
  std::int64_t live = lv.resident_bytes;
  int count = 0;
  for (int s = 0; s < ns; ++s) {
    live += delta[s];
    count += count_delta[s];
    lv.live_bytes[s] = live;
    lv.live_count[s] = count;
    if (live > lv.liveness_peak) {
      lv.liveness_peak = live;
      lv.peak_step = s;
    }
  }
  return lv;
}

}  // namespace ucplan
