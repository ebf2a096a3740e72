// Editing plans in tests: breaking them on purpose while keeping everything else consistent.
#pragma once

#include <algorithm>
#include <map>
#include <string>

#include "planner/model/plan.h"

namespace ucplan::test {

// Re-derives every step's predicted start/end and the summary from durations and waits, so a
// mutated plan fails for the reason a test means, not for stale times.
inline void retime(Plan& p) {
  std::map<Stream, std::int64_t> stream_end;
  std::map<Stream, int> last_on;
  std::int64_t round_end = 0, final_end = 0;
  for (auto& s : p.steps) {
    const std::int64_t dur = s.end_ns - s.start_ns;
    std::int64_t start = s.final ? final_end : stream_end[s.stream];
    for (int w : s.waits) start = std::max(start, p.steps[w].end_ns);
    s.start_ns = start;
    s.end_ns = start + dur;
    if (s.final)
      final_end = s.end_ns;
    else {
      stream_end[s.stream] = s.end_ns;
      round_end = std::max(round_end, s.end_ns);
    }
  }
  p.summary.round_ns = round_end;
  p.summary.final_ns = final_end;
  p.summary.predicted_ns = p.rounds * round_end + final_end;
}

// Recomputes every buffer's first/last step from the steps that touch it (ids out of range, as a
// mutant may hold, are skipped); resident and carried buffers live for the whole program.
inline void relife(Plan& p) {
  for (auto& b : p.buffers) {
    if (b.resident || b.carried) {
      b.last_step = static_cast<int>(p.steps.size()) - 1;
      continue;
    }
    b.first_step = -1;
    b.last_step = -1;
  }
  for (const auto& s : p.steps) {
    auto touch = [&](int b) {
      if (b < 0 || b >= static_cast<int>(p.buffers.size()) || p.buffers[b].resident || p.buffers[b].carried) return;
      if (p.buffers[b].first_step < 0) p.buffers[b].first_step = s.id;
      p.buffers[b].last_step = s.id;
    };
    for (int b : s.reads) touch(b);
    for (int b : s.writes) touch(b);
    for (int b : s.accumulates) touch(b);
    touch(s.workspace);
  }
}

// Removes a step: later ids shift down, waits on it disappear, buffer lifetimes follow.
inline void remove_step(Plan& p, int id) {
  p.steps.erase(p.steps.begin() + id);
  for (auto& s : p.steps) {
    if (s.id > id) --s.id;
    std::vector<int> w;
    for (int x : s.waits)
      if (x != id) w.push_back(x > id ? x - 1 : x);
    s.waits = w;
  }
  relife(p);
  retime(p);
}

// Inserts `step` at position `at`: it and every later step get the next id, waits follow them,
// buffer lifetimes follow the steps, times are derived again.
inline void insert_step(Plan& p, int at, PlanStep step) {
  for (auto& s : p.steps) {
    if (s.id >= at) ++s.id;
    for (int& w : s.waits)
      if (w >= at) ++w;
  }
  step.id = at;
  p.steps.insert(p.steps.begin() + at, std::move(step));
  relife(p);
  retime(p);
}

// Declares an activation that is read again later dead right after the compute step that writes
// it (the first such buffer). Returns whether there was one.
inline bool free_an_activation_early(Plan& p) {
  for (auto& b : p.buffers) {
    if (b.resident || b.tensor.rfind("Y:", 0) != 0 || b.last_step <= b.first_step + 1) continue;
    if (p.steps[b.first_step].stream != Stream::Compute) continue;
    b.last_step = b.first_step;
    return true;
  }
  return false;
}

}  // namespace ucplan::test
