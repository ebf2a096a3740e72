#include "errors.h"

#include <cstdio>
#include <cstdlib>

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
  static const std::string repeated = "At Most 1 required but received ";
  std::string m = what;
  if (const auto at = m.find(repeated); at != std::string::npos) {
    std::size_t end = at + repeated.size();
    while (end < m.size() && m[end] >= '0' && m[end] <= '9') ++end;
    const std::string times = m.substr(at + repeated.size(), end - at - repeated.size());
    if (!times.empty()) m.replace(at, end - at, "given " + times + " times; give it once");
  }
  return one_line(m);
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
