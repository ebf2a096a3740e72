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
