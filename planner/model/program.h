// What every ucplan program's main does around its own work, so that the four say errors alike
// (DESIGN.md, errors): a bad command line is one line on stderr, "PROGRAM: error: WHAT (see
// PROGRAM [SUBCOMMAND ]--help)", exit 2; --help and --version print and exit 0; then the body,
// whose user errors and running out of host memory are one line "PROGRAM: error: WHAT", exit 2,
// and any other exception (a device's failure: a CUDA or cuDNN error) one line too, exit 1.
// Header-only: each program links CLI11, the planner's libraries do not.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "planner/model/errors.h"

namespace ucplan {

// An option given an empty value (`--svg ""`): every option here names a file, a size, a count or
// a choice, none of which is empty, and the programs read "" as "not given". "" if none, else the
// option's name.
inline std::string option_given_empty(const CLI::App& app) {
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 0 && o->get_type_size() > 0)
      for (const std::string& r : o->results())
        if (r.empty()) return o->get_name(false, true);
  for (const CLI::App* sub : app.get_subcommands()) {
    const std::string name = option_given_empty(*sub);
    if (!name.empty()) return name;
  }
  return "";
}

// A count as the user writes it, for an option's transform: decimal digits (spaces around them
// skipped, leading zeros too), from lo to hi. On its own CLI11 reads "010" as octal 8 and "0x10"
// as 16 and takes "+8", where every size, time and share reads "010" as 10 (units.h).
template <class Int>
CLI::Validator whole_number(Int lo, Int hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        if (s.empty()) return "an empty value";  // as every other option says it (run_program)
        const std::size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
        std::string t = a == std::string::npos ? "" : s.substr(a, b - a + 1);
        const bool digits = !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
        if (digits) t.erase(0, std::min(t.find_first_not_of('0'), t.size() - 1));
        if (!digits || t.size() > 18 || std::stoll(t) < static_cast<long long>(lo) ||
            std::stoll(t) > static_cast<long long>(hi))
          return fmt::format("expected a whole number from {} to {}, got \"{}\"", lo, hi, s);
        s = t;
        return "";
      },
      "", "whole number");
}

// The index of --device "cuda" (0) or "cuda:N" (N, digits only: "cuda:1x" and "cuda:-1" are not
// devices 1 and 0), or a UserError naming the option and the program's `choices` ("cpu, cuda or
// cuda:N"). `device` is "cuda" or begins with "cuda:".
inline int cuda_device_index(const std::string& device, const std::string& choices) {
  const std::string digits = device == "cuda" ? "0" : device.substr(5);
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
    throw UserError("", "--device", fmt::format("expected {} (a device index), got \"{}\"", choices, device));
  return std::stoi(digits);
}

// `app` (named `program`, e.g. "ucplan run") parsed from the command line, then `body()`'s exit
// code; or 2 on a bad command line, a UserError, std::bad_alloc or output lost on standard output
// (a full disk, a closed pipe: the report was not written), 1 on another exception.
template <class Body>
int run_program(CLI::App& app, const std::string& program, int argc, char** argv, Body&& body) {
  // CLI11's default message adds a second line; the subcommand named is the one being parsed.
  app.failure_message([program](const CLI::App* a, const CLI::Error& e) {
    const auto subs = a->get_subcommands();
    return fmt::format("{}: error: {} (see {} {}--help)\n", program, command_line_message(e.what()), program,
                       subs.empty() ? "" : subs.front()->get_name() + " ");
  });
  // Every program answers --version (`ucplan profile --version` said "network is required").
  if (app.get_version_ptr() == nullptr) app.set_version_flag("--version", std::string("ucplan ") + UCPLAN_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (const std::string empty = option_given_empty(app); !empty.empty()) {
    const auto subs = app.get_subcommands();
    std::fprintf(stderr, "%s: error: %s: an empty value (see %s %s--help)\n", program.c_str(), empty.c_str(),
                 program.c_str(), subs.empty() ? "" : (subs.front()->get_name() + " ").c_str());
    return 2;
  }
  auto stdout_lost = [&program]() {
    std::fprintf(stderr, "%s: error: standard output: writing failed (%s): the output is incomplete\n", program.c_str(),
                 std::strerror(errno));
    return 2;
  };
  try {
    const int code = body();
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) return stdout_lost();
    return code;
  } catch (const std::system_error& e) {  // fmt::print's "cannot write to file"
    if (std::ferror(stdout)) return stdout_lost();
    // std::thread's: no room for a thread's stack (an address-space limit), as out of memory.
    if (e.code() == std::errc::resource_unavailable_try_again) {
      std::fprintf(stderr,
                   "%s: error: cannot start a thread (%s): the host's memory or this process's limits (ulimit -v, "
                   "-u) are too small for the input, its batch or the plan\n",
                   program.c_str(), e.what());
      return 2;
    }
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 1;
  } catch (const UserError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), kOutOfHostMemory);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 1;
  }
}

}  // namespace ucplan
