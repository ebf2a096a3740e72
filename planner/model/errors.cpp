#include "errors.h"

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace ucplan {
namespace {
std::string join_message(const std::string& file, const std::string& where, const std::string& what) {
  std::string m;
  if (!file.empty()) m += file + ": ";
  if (!where.empty()) m += where + ": ";
  m += what;
  return one_line(m);
}
}  // namespace

std::string one_line(const std::string& m) {
  // Input strings echoed in a message (a layer name, a key, an option) may hold newlines or
  // other control characters; they are written as escapes.
  std::string out;
  for (char c : m) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

std::string command_line_message(const std::string& what) {
  // CLI11's messages for a value it cannot take, said as the planner's own errors are:
  // "OPTION: what was expected, got "VALUE"".
  static const std::regex repeated(R"(At Most 1 required but received (\d+))");
  static const std::regex unconverted(R"(^Could not convert: (\S+) = (.*)$)");
  static const std::regex out_of_range(R"(^(\S+): Value (.*) not in range (\S+) to (\S+)$)");
  static const std::regex missing_value(R"(^(\S+): \d+ required \S+ missing$)");
  static const std::regex not_member(R"(^(\S+): (.*) not in \{(.*)\}$)");
  std::smatch m;
  std::string out;
  if (std::regex_search(what, m, repeated)) {
    out = m.prefix().str() + "given " + m[1].str() + " times; give it once" + m.suffix().str();
  } else if (std::regex_match(what, m, unconverted)) {
    out = fmt::format("{}: expected a number, got \"{}\"", m[1].str(), m[2].str());
  } else if (std::regex_match(what, m, out_of_range)) {
    out = fmt::format("{}: expected a whole number from {} to {}, got \"{}\"", m[1].str(), m[3].str(), m[4].str(),
                      m[2].str());
  } else if (std::regex_match(what, m, missing_value)) {
    out = m[1].str() + ": needs a value";
  } else if (std::regex_match(what, m, not_member)) {
    std::vector<std::string> choices;
    std::stringstream in(m[3].str());
    for (std::string c; std::getline(in, c, ',');) choices.push_back(c);
    std::string list;
    for (std::size_t i = 0; i < choices.size(); ++i)
      list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    out = fmt::format("{}: expected {}, got \"{}\"", m[1].str(), list, m[2].str());
  } else {
    out = what;
  }
  return one_line(out);
}

UserError::UserError(std::string file, std::string where, std::string what)
    : std::runtime_error(join_message(file, where, what)),
      file_(std::move(file)),
      where_(std::move(where)),
      reason_(std::move(what)) {}

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "ucplan internal error at %s:%d: check '%s' failed: %s\n", file, line, expr, msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ucplan
