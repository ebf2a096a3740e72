#include "plan_views.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "planner/model/json_util.h"
#include "planner/model/units.h"

namespace ucplan {

namespace {

int tid_of(Stream stream) { return static_cast<int>(stream) + 1; }

std::string step_label(const PlanStep& s) {
  return std::string(step_op_name(s.op)) + " " + (s.stream == Stream::Compute ? s.layer : s.tensor) +
         (s.ahead ? " (the next round's)" : "");
}

}  // namespace

std::vector<std::pair<std::int64_t, std::int64_t>> memory_profile(const Plan& plan) {
  std::int64_t resident = 0;
  // A buffer is in use from the first start to the last end of the round's steps that touch it:
  // its last_step is the highest step id, but a copy on another stream with a lower id (an
  // offload reading it) can end later.
  std::vector<std::int64_t> from(plan.buffers.size(), INT64_MAX), to(plan.buffers.size(), INT64_MIN);
  for (const PlanStep& s : plan.steps) {
    if (s.final) continue;
    auto use = [&](int b) {
      from[static_cast<std::size_t>(b)] = std::min(from[static_cast<std::size_t>(b)], s.start_ns);
      to[static_cast<std::size_t>(b)] = std::max(to[static_cast<std::size_t>(b)], s.end_ns);
    };
    for (int b : s.reads) use(b);
    for (int b : s.writes) use(b);
    for (int b : s.accumulates) use(b);
    if (s.workspace >= 0) use(s.workspace);
  }
  std::map<std::int64_t, std::int64_t> delta;
  for (std::size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer& b = plan.buffers[i];
    if (b.resident || b.carried) {
      resident += b.size;
      continue;
    }
    if (from[i] > to[i]) continue;  // touched by no round step
    delta[from[i]] += b.size;
    delta[to[i]] -= b.size;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> points{{0, resident}};
  std::int64_t in_use = resident;
  for (const auto& [t, d] : delta) {
    in_use += d;
    if (points.back().first == t)
      points.back().second = in_use;
    else
      points.emplace_back(t, in_use);
  }
  return points;
}

std::string chrome_trace(const Plan& plan, const std::vector<MeasuredStep>* measured, const RunDevice* ran_on,
                         int max_rounds) {
  OrderedJson events = OrderedJson::array();
  const std::string source = measured ? "measured" : "predicted";
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"args", {{"name", fmt::format("ucplan {} ({})", plan.network.name, source)}}}});
  for (Stream s : {Stream::Compute, Stream::H2D, Stream::D2H})
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid_of(s)}, {"args", {{"name", stream_name(s)}}}});
  auto add = [&](const PlanStep& s, int round, std::int64_t start, std::int64_t end, std::int64_t bytes = 0) {
    OrderedJson args = {{"step", s.id}, {"round", round}};
    if (bytes > 0) args["bytes"] = bytes;
    if (!s.config.empty()) {
      std::string c;
      for (const auto& m : s.config) c += fmt::format("{}{}x{}", c.empty() ? "" : ", ", m.algo, m.batch);
      args["config"] = c;
    }
    events.push_back({{"name", step_label(s)},
                      {"cat", step_op_name(s.op)},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", tid_of(s.stream)},
                      {"ts", static_cast<double>(start) / 1000.0},
                      {"dur", static_cast<double>(end - start) / 1000.0},
                      {"args", args}});
  };
  std::int64_t final_offset = 0;
  if (measured) {
    for (const auto& m : *measured) add(plan.steps[m.step], m.round, m.start_ns, m.end_ns, m.bytes);
  } else {
    const int rounds = static_cast<int>(std::min<std::int64_t>(plan.rounds, max_rounds));
    for (int r = 0; r < rounds; ++r)
      for (const auto& s : plan.steps)
        if (!s.final) add(s, r, r * plan.summary.round_ns + s.start_ns, r * plan.summary.round_ns + s.end_ns);
    final_offset = rounds * plan.summary.round_ns;
    for (const auto& s : plan.steps)
      if (s.final) add(s, -1, final_offset + s.start_ns, final_offset + s.end_ns);
    // Memory counter track of the predicted rounds.
    auto profile = memory_profile(plan);
    for (int r = 0; r < rounds; ++r)
      for (const auto& [t, bytes] : profile)
        events.push_back({{"name", "arena bytes in use"},
                          {"ph", "C"},
                          {"pid", 1},
                          {"ts", static_cast<double>(r * plan.summary.round_ns + t) / 1000.0},
                          {"args", {{"bytes", bytes}}}});
  }
  OrderedJson doc = {{"displayTimeUnit", "ms"},
                     {"otherData",
                      {{"network", plan.network.name},
                       {"timeline", source},
                       {"profile_source", plan.profile_source},
                       {"budget_bytes", plan.budget_bytes},
                       {"rounds", plan.rounds}}},
                     {"traceEvents", events}};
  if (ran_on) doc["otherData"]["device"] = {{"kind", ran_on->kind}, {"name", ran_on->name}};
  if (!measured && plan.rounds > max_rounds)  // the rounds after these are the same; the updates follow them here
    doc["otherData"]["rounds_drawn"] = fmt::format(
        "{} of {} (the rest are the same): the final updates follow round {} here, round {} in the "
        "plan, which predicts {}",
        max_rounds, plan.rounds, max_rounds, plan.rounds, format_ns(plan.summary.predicted_ns));
  return dump_json(doc);
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters even as references.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') ? '?' : c;
    }
  }
  return out;
}

std::int64_t max_bytes_in_use(const Plan& plan) {
  std::int64_t most = 0;
  for (const auto& point : memory_profile(plan)) most = std::max(most, point.second);
  return most;
}

std::int64_t first_layer_wait_ns(const Plan& plan) {
  std::int64_t first = -1;
  for (const PlanStep& st : plan.steps)
    if (!st.final && st.stream == Stream::Compute && (first < 0 || st.start_ns < first)) first = st.start_ns;
  return plan.rounds * std::max<std::int64_t>(first, 0);
}

std::string memory_svg(const Plan& plan) {
  const auto points = memory_profile(plan);
  const double W = 900, H = 420, left = 90, right = 20, top = 40, bottom = 50;
  const double t_max = static_cast<double>(std::max<std::int64_t>(plan.summary.round_ns, 1));
  double y_max = static_cast<double>(plan.budget_bytes);
  for (const auto& p : points) y_max = std::max(y_max, static_cast<double>(p.second));
  y_max *= 1.05;
  auto X = [&](double t) { return left + (W - left - right) * t / t_max; };
  auto Y = [&](double b) { return top + (H - top - bottom) * (1.0 - b / y_max); };
  std::string path;
  double prev_y = Y(static_cast<double>(points.front().second));
  path += fmt::format("M {:.1f} {:.1f}", X(0), prev_y);
  for (const auto& [t, b] : points) {
    double x = X(static_cast<double>(t)), y = Y(static_cast<double>(b));
    path += fmt::format(" L {:.1f} {:.1f} L {:.1f} {:.1f}", x, prev_y, x, y);
    prev_y = y;
  }
  path += fmt::format(" L {:.1f} {:.1f}", X(t_max), prev_y);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"14\">{3}, batch {4} ({5} round{9} of {6}), strategy {7}: arena bytes in "
      "use over one round "
      "({8})</text>\n",
      W, H, left, xml_escape(plan.network.name), plan.batch, plan.rounds, plan.sub_batch, xml_escape(plan.strategy),
      xml_escape(plan.profile_source == "measured" ? "predicted from measured costs"
                                                   : "predicted from " + plan.profile_source),
      plan.rounds == 1 ? "" : "s");
  auto hline = [&](double bytes, const char* color, const std::string& label) {
    double y = Y(bytes);
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-dasharray=\"6 4\"/>\n",
        left, y, W - right, y, color);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" text-anchor=\"end\">{}</text>\n", W - right - 4,
                       y - 4, color, label);
  };
  hline(static_cast<double>(plan.budget_bytes), "#c0392b", "budget " + format_bytes(plan.budget_bytes));
  hline(static_cast<double>(plan.summary.lower_bound_bytes), "#7f8c8d",
        "lower bound " + format_bytes(plan.summary.lower_bound_bytes));
  svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#2c7fb8\" stroke-width=\"1.5\"/>\n", path);
  // Axes with a few ticks.
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, H - bottom);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left, H - bottom,
                     W - right);
  for (int i = 0; i <= 4; ++i) {
    double b = y_max * i / 4.0, t = t_max * i / 4.0;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6, Y(b) + 4,
                       format_bytes(static_cast<std::int64_t>(b)));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", X(t), H - bottom + 18,
                       format_ns(static_cast<std::int64_t>(t)));
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">time in the round</text>\n",
                     (left + W - right) / 2, H - 10);
  svg += "</svg>\n";
  return svg;
}

}  // namespace ucplan
