// Units the user sees: bytes as B/KiB/MiB/GiB, time as ns/us/ms/s. Parsing is strict: a size
// needs a unit (a bare number is refused, so "12" never silently means 12 bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ucplan {

// A number and its unit as the user writes them: "1.5 GiB" -> {"1.5", 1.5, "GiB"}. The number is
// decimal digits with at most one '.' (no sign, exponent, hex, inf or nan); whitespace around it
// and around the unit is skipped; the unit is what follows, up to the end or a space (empty when
// none). nullopt when the text does not read that way. Sizes, times and shares all read through
// it, so "1e3" or " 60" mean the same to every option.
struct NumberAndUnit {
  std::string number;
  long double value = 0;
  std::string unit;
};
std::optional<NumberAndUnit> split_number(std::string_view text);
// "12GiB", "120 MiB", "1.5GB", "4096B" -> bytes (whole numbers exactly; a fraction of a unit to
// the nearest byte). nullopt when malformed or negative, and with `why` set when it is a size but
// not one of 64 bits, or a fraction of a byte.
std::optional<std::int64_t> parse_bytes(std::string_view text, std::string* why = nullptr);
// "60s", "1.5 min", "250ms", "2h", "90" (a bare number is seconds) -> seconds; ns, us, ms, s, min
// and h, in any case (as sizes' units). nullopt when malformed.
std::optional<double> parse_seconds(std::string_view text);
// What is wrong with `text` as a size, after parse_bytes refused it (`why` its reason): the reason,
// or that a bare number has no unit, or that it is not a size (e.g. `example`).
std::string size_error(std::string_view text, const std::string& why, const char* example);
// 1536 -> "1.50 KiB"; exact powers keep 3 significant digits.
std::string format_bytes(std::int64_t bytes);
// Two sizes a message sets against each other ("X is below the bound of Y"): format_bytes of each,
// or both as exact byte counts ("55,784,192 B") where format_bytes would print them alike.
struct BytesApart {
  std::string first, second;
};
BytesApart format_bytes_apart(std::int64_t first, std::int64_t second);
// seconds -> "12.3 ms", "1.20 s", "850 us".
std::string format_seconds(double seconds);
// nanoseconds (the planner's integer clock) -> same as format_seconds.
std::string format_ns(std::int64_t ns);
// ratio as percentage with sign, e.g. 0.034 -> "+3.4 %".
std::string format_percent(double fraction);
// 1234567 -> "1,234,567".
std::string with_thousands(long long v);

}  // namespace ucplan
