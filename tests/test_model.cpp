// The data model's views of a plan (planner/views/plan_views.h), and the units the user reads
// (planner/model/units.h).
#include <doctest/doctest.h>

#include <string>

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
