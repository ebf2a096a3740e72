#include "units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace ucplan {

std::optional<NumberAndUnit> split_number(std::string_view text) {
  auto space = [&](std::size_t i) { return i < text.size() && std::isspace(static_cast<unsigned char>(text[i])); };
  std::size_t i = 0;
  while (space(i)) ++i;
  const std::size_t start = i;
  int dots = 0, digits = 0;
  for (; i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i)
    text[i] == '.' ? ++dots : ++digits;
  if (digits == 0 || dots > 1) return std::nullopt;
  NumberAndUnit q;
  q.number = std::string(text.substr(start, i - start));
  q.value = std::strtold(q.number.c_str(), nullptr);  // HUGE_VALL past long double's range: too large for any use
  while (space(i)) ++i;
  const std::size_t unit = i;
  while (i < text.size() && !space(i)) ++i;
  q.unit = std::string(text.substr(unit, i - unit));
  while (space(i)) ++i;
  if (i != text.size()) return std::nullopt;
  return q;
}

std::optional<double> parse_seconds(std::string_view text) {
  const auto q = split_number(text);
  if (!q) return std::nullopt;
  static const std::pair<const char*, long double> kUnits[] = {{"", 1},       {"s", 1},    {"ms", 1e-3L}, {"us", 1e-6L},
                                                               {"ns", 1e-9L}, {"min", 60}, {"h", 3600}};
  std::string unit;
  for (char c : q->unit) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [name, scale] : kUnits)
    if (unit == name) return static_cast<double>(q->value * scale);
  return std::nullopt;
}

std::optional<std::int64_t> parse_bytes(std::string_view text, std::string* why) {
  if (why) why->clear();
  auto fail = [&](const char* reason) -> std::optional<std::int64_t> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const auto q = split_number(text);
  if (!q) return std::nullopt;
  const std::string& number = q->number;
  const long double value = q->value;
  std::string unit;
  for (char c : q->unit) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::int64_t scale = 0;
  if (unit == "b")
    scale = 1;
  else if (unit == "kib" || unit == "k")
    scale = std::int64_t{1} << 10;
  else if (unit == "mib" || unit == "m")
    scale = std::int64_t{1} << 20;
  else if (unit == "gib" || unit == "g")
    scale = std::int64_t{1} << 30;
  else if (unit == "tib" || unit == "t")
    scale = std::int64_t{1} << 40;
  else if (unit == "kb")
    scale = 1000;
  else if (unit == "mb")
    scale = 1000 * 1000;
  else if (unit == "gb")
    scale = 1000 * 1000 * 1000;
  else if (unit == "tb")
    scale = std::int64_t{1000} * 1000 * 1000 * 1000;
  else
    return std::nullopt;
  const char* const too_large = "more than a 64-bit count of bytes holds (2^63 bytes, 8,388,608 TiB)";
  if (number.find('.') == std::string::npos) {  // a whole number: exact, whatever its size
    __extension__ typedef __int128 Wide;
    Wide bytes = 0;
    for (char c : number) {
      bytes = bytes * 10 + (c - '0');
      if (bytes > std::numeric_limits<std::int64_t>::max()) return fail(too_large);
    }
    bytes *= scale;
    if (bytes > std::numeric_limits<std::int64_t>::max()) return fail(too_large);
    return static_cast<std::int64_t>(bytes);
  }
  const long double bytes = value * static_cast<long double>(scale);
  if (std::roundl(bytes) >= 0x1p63L) return fail(too_large);  // infinite too (a thousand digits)
  if (scale == 1 && bytes != std::floor(bytes)) return fail("not a whole number of bytes");
  return static_cast<std::int64_t>(std::llround(bytes));
}

std::string size_error(std::string_view text, const std::string& why, const char* example) {
  if (!why.empty()) return fmt::format("\"{}\" is {}", text, why);
  if (const auto q = split_number(text); q && q->unit.empty())
    return fmt::format("\"{}\" has no unit: write {}MiB or {}GiB", text, q->number, q->number);
  return fmt::format("\"{}\" is not a size with a unit (e.g. {})", text, example);
}

namespace {
// Three significant digits (at most two decimals), chosen by the value as it rounds: 9.996 is
// "10.0" (not "10.00"), 99.96 is "100".
std::string three_digits(double v, const char* unit) {
  const double a = std::fabs(v);
  return fmt::format("{:.{}f} {}", v, a >= 99.95 ? 0 : a >= 9.995 ? 1 : 2, unit);
}
}  // namespace

std::string format_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1023.5 && u < 4) {  // what would print as "1024" goes up a unit
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", bytes);
  return three_digits(v, units[u]);
}

BytesApart format_bytes_apart(std::int64_t first, std::int64_t second) {
  BytesApart a{format_bytes(first), format_bytes(second)};
  if (first != second && a.first == a.second) a = {with_thousands(first) + " B", with_thousands(second) + " B"};
  return a;
}

std::string format_seconds(double s) {
  const double a = std::fabs(s);
  if (a == 0) return "0 s";
  // What would print as "1000" goes up a unit: 999.6 us is "1.00 ms".
  if (a >= 0.9995) return three_digits(s, "s");
  if (a >= 0.9995e-3) return three_digits(s * 1e3, "ms");
  if (a >= 0.9995e-6) return three_digits(s * 1e6, "us");
  return three_digits(s * 1e9, "ns");
}

std::string format_ns(std::int64_t ns) { return format_seconds(static_cast<double>(ns) * 1e-9); }

std::string format_percent(double fraction) { return fmt::format("{:+.1f} %", fraction * 100.0); }

std::string with_thousands(long long v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n && n % 3 == 0) out += ',';
    out += *it;
    ++n;
  }
  if (v < 0) out += '-';
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace ucplan
