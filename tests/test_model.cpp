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
