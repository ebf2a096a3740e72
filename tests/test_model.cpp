// The data model's views of a plan (planner/views/plan_views.h), and the units the user reads
// (planner/model/units.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/errors.h"
#include "planner/model/plan.h"
#include "planner/model/units.h"
#include "planner/views/plan_views.h"

using namespace ucplan;

TEST_CASE("the memory SVG escapes names from the plan, so any network name gives well-formed XML") {
  Plan p = load_plan(std::string(UCPLAN_SOURCE_DIR) + "/plans/resnet20-b64-cpu-16mib.json");
  p.network.name = "my<net>&\"'";
  const std::string svg = memory_svg(p);
  CHECK(svg.find("my&lt;net&gt;&amp;&quot;&apos;") != std::string::npos);
  CHECK(svg.find("my<net>") == std::string::npos);
  // The trace is JSON, escaped by the JSON writer.
  CHECK(chrome_trace(p).find("my<net>&\\\"'") != std::string::npos);
}

TEST_CASE("bytes in use count a buffer until the last step that touches it ends, on any stream") {
  // At each start and end of a round step, brute force: the buffers some step touching them has
  // begun and not every such step has ended. An offload on d2h with a lower step id than a
  // buffer's last_step can end later: the views counted the buffer free at its last_step's end.
  for (const char* name : {"resnet20-b64-k40-24mib.json", "resnet50-b128-h100-6gib.json"}) {
    CAPTURE(name);
    const Plan p = load_plan(std::string(UCPLAN_SOURCE_DIR) + "/plans/" + name);
    std::vector<std::int64_t> from(p.buffers.size(), INT64_MAX), to(p.buffers.size(), INT64_MIN);
    std::vector<std::int64_t> times;
    for (const PlanStep& s : p.steps) {
      if (s.final) continue;
      times.push_back(s.start_ns);
      times.push_back(s.end_ns);
      std::vector<int> touched = s.reads;
      touched.insert(touched.end(), s.writes.begin(), s.writes.end());
      touched.insert(touched.end(), s.accumulates.begin(), s.accumulates.end());
      if (s.workspace >= 0) touched.push_back(s.workspace);
      for (int b : touched) {
        from[static_cast<std::size_t>(b)] = std::min(from[static_cast<std::size_t>(b)], s.start_ns);
        to[static_cast<std::size_t>(b)] = std::max(to[static_cast<std::size_t>(b)], s.end_ns);
      }
    }
    int outlived = 0;  // buffers used after their last_step's end: what the test is about
    std::int64_t peak = 0;
    const auto profile = memory_profile(p);  // a step function: (time, bytes from then on)
    int wrong = 0;
    for (std::int64_t t : times) {
      std::int64_t bytes = 0;
      for (std::size_t b = 0; b < p.buffers.size(); ++b)
        if (p.buffers[b].resident || p.buffers[b].carried || (from[b] <= t && t < to[b])) bytes += p.buffers[b].size;
      peak = std::max(peak, bytes);
      auto at =
          std::upper_bound(profile.begin(), profile.end(), t,
                           [](std::int64_t x, const std::pair<std::int64_t, std::int64_t>& q) { return x < q.first; });
      REQUIRE(at != profile.begin());
      wrong += std::prev(at)->second != bytes;
    }
    CHECK(wrong == 0);
    for (std::size_t b = 0; b < p.buffers.size(); ++b)
      if (!p.buffers[b].resident && !p.buffers[b].carried && p.buffers[b].last_step >= 0 &&
          to[b] > p.steps[static_cast<std::size_t>(p.buffers[b].last_step)].end_ns)
        ++outlived;
    CHECK(outlived > 0);
    CHECK(max_bytes_in_use(p) == peak);
    CHECK(peak <= p.arena_bytes);
  }
}

TEST_CASE("sizes and times keep three digits, and what would round to 1024 or 1000 goes up a unit") {
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1.00 KiB");
  CHECK(format_bytes(10239) == "10.0 KiB");  // 9.999 KiB: "10.00 KiB" had four digits
  CHECK(format_bytes(102399) == "100 KiB");
  CHECK(format_bytes(1048575) == "1.00 MiB");  // 1023.999 KiB: "1024 KiB" before
  CHECK(format_bytes(1048063) == "1023 KiB");  // 1023.5 KiB less a byte
  CHECK(format_bytes(-1048575) == "-1.00 MiB");
  CHECK(format_seconds(999.6e-6) == "1.00 ms");  // "1000 us" before
  CHECK(format_seconds(999.4e-6) == "999 us");
  CHECK(format_seconds(9.996e-3) == "10.0 ms");
  CHECK(format_seconds(0.99996) == "1.00 s");
  CHECK(format_ns(1) == "1.00 ns");
  CHECK(format_ns(0) == "0 s");
}

TEST_CASE("sizes parse exactly: whole numbers to the byte at any size, 64 bits at most, no fraction of a byte") {
  CHECK(parse_bytes("12GiB") == std::int64_t{12} << 30);
  CHECK(parse_bytes("1.5 KiB") == 1536);
  CHECK(parse_bytes("1.5GB") == 1500000000);
  // Whole numbers are exact past a double's 53 bits (they went through one and lost their last bits).
  CHECK(parse_bytes("9007199254740993B") == 9007199254740993);
  CHECK(parse_bytes("9223372036854775807B") == INT64_MAX);
  std::string why;
  CHECK_FALSE(parse_bytes("9223372036854775808B", &why));
  CHECK(why.find("64-bit") != std::string::npos);
  CHECK_FALSE(parse_bytes("8388608TiB", &why));  // 2^63 bytes
  CHECK(why.find("64-bit") != std::string::npos);
  CHECK_FALSE(parse_bytes("0.5B", &why));  // was read as 1 byte
  CHECK(why == "not a whole number of bytes");
  CHECK_FALSE(parse_bytes("12", &why));  // a bare number is refused, and is not a size at all
  CHECK(why.empty());
  CHECK_FALSE(parse_bytes("1e3GiB", &why));
  CHECK(why.empty());
}

TEST_CASE("sizes, times and shares read their numbers alike: decimal, no exponent, sign or hex") {
  const auto q = split_number(" 1.5 GiB ");
  REQUIRE(q);
  CHECK(q->number == "1.5");
  CHECK(q->value == 1.5L);
  CHECK(q->unit == "GiB");
  CHECK(split_number("50%")->unit == "%");
  CHECK(split_number("12")->unit.empty());
  for (const char* bad : {"", " ", ".", "1..5s", "-1s", "+1s", "inf", "nan", "1 2 s", "s", "1.2.3"})
    CHECK_MESSAGE(!split_number(bad), std::string(bad));
  CHECK(split_number("1e2s")->unit == "e2s");  // an exponent is not a number's: no unit reads it
  CHECK(split_number("0x10")->unit == "x10");

  CHECK(parse_seconds("60s") == 60);
  CHECK(parse_seconds("90") == 90);  // a bare time is seconds (a bare size is refused: bytes are too small a default)
  CHECK(parse_seconds(" 1.5 min") == 90);
  CHECK(parse_seconds("250ms") == 0.25);
  CHECK(parse_seconds("2h") == 7200);
  CHECK(parse_seconds("500us") == doctest::Approx(5e-4));
  for (const char* bad : {"1e2s", "0x10", "inf", "soon", "60 sec", "1m", "-5s", "1e2"})
    CHECK_MESSAGE(!parse_seconds(bad), std::string(bad));
  CHECK_FALSE(parse_bytes("0x10GiB"));
  CHECK(parse_seconds("60S") == 60);  // units in any case, as sizes' are
  CHECK(parse_seconds("250MS") == 0.25);
  // A fraction just under 2^63 bytes is a size (the cut was at 9.2e18); a thousand digits are too
  // large, not malformed.
  CHECK(parse_bytes("9210000000.5GB") == std::int64_t{9210000000500000000});
  std::string why;
  CHECK_FALSE(parse_bytes(std::string(1000, '9') + ".5GiB", &why));
  CHECK(why.find("64-bit") != std::string::npos);
}

TEST_CASE("two sizes a message sets against each other never read the same unless they are") {
  // format_bytes keeps three digits: a budget a byte under a bound would print as the bound.
  CHECK(format_bytes(55784191) == format_bytes(55784192));
  const BytesApart close = format_bytes_apart(55784191, 55784192);
  CHECK(close.first == "55,784,191 B");
  CHECK(close.second == "55,784,192 B");
  const BytesApart far = format_bytes_apart(2048, 3840);
  CHECK(far.first == "2.00 KiB");
  CHECK(far.second == "3.75 KiB");
  const BytesApart same = format_bytes_apart(4096, 4096);  // equal: no need for bytes
  CHECK(same.first == "4.00 KiB");
  CHECK(same.second == "4.00 KiB");
}
