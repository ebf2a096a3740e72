// The data model's views of a plan (planner/views/plan_views.h).
#include <doctest/doctest.h>

#include <string>

#include "planner/model/errors.h"
#include "planner/model/plan.h"
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
