// Two kinds of failure (STYLE.md #6): bad input is a UserError (one line naming the file, the
// place in it and what is wrong; the CLI exits with 2); a broken internal invariant is a
// UCPLAN_CHECK failure, which aborts with file:line because it is a bug, never user input.
// A third, the host's memory running out (std::bad_alloc), is neither: each program says so in
// one line (kOutOfHostMemory) and exits with 2, as for an input too large for the machine.
#pragma once

#include <stdexcept>
#include <string>

namespace ucplan {

inline constexpr const char* kOutOfHostMemory =
    "ran out of host memory (std::bad_alloc): the input, its batch or the plan is more than this machine can hold";

class UserError : public std::runtime_error {
 public:
  // file: the input file ("" when the error is about a command-line option);
  // where: JSON path, layer name or option ("" when not applicable); what: the reason.
  UserError(std::string file, std::string where, std::string what);
  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string file_, where_, reason_;
};

// The text with control characters escaped (\n, \t, \xNN): an error message is one line, always.
std::string one_line(const std::string& text);

// A command-line parser's message (CLI11's) as one line, with what it could not take said plainly:
// "--budget: given 2 times; give it once" instead of "At Most 1 required but received 2",
// "--points: expected a number, got "abc"" instead of "Could not convert: --points = abc", and
// likewise a value out of an integer range, a missing value and one not among the choices.
std::string command_line_message(const std::string& what);

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace ucplan

#define UCPLAN_CHECK(cond, msg)                                            \
  do {                                                                     \
    if (!(cond)) ::ucplan::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
