// What every ucplan program's main does around its own work, so that the four say errors alike
// (DESIGN.md, errors): a bad command line is one line on stderr, "PROGRAM: error: WHAT (see
// PROGRAM [SUBCOMMAND ]--help)", exit 2; --help and --version print and exit 0; then the body,
// whose user errors and running out of host memory are one line "PROGRAM: error: WHAT", exit 2,
// and any other exception (a device's failure: a CUDA or cuDNN error) one line too, exit 1.
// Header-only: each program links CLI11, the planner's libraries do not.
#pragma once

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "planner/model/errors.h"

namespace ucplan {

// `app` (named `program`, e.g. "ucplan run") parsed from the command line, then `body()`'s exit
// code; or 2 on a bad command line, a UserError or std::bad_alloc, 1 on another exception.
template <class Body>
int run_program(CLI::App& app, const std::string& program, int argc, char** argv, Body&& body) {
  // CLI11's default message adds a second line; the subcommand named is the one being parsed.
  app.failure_message([program](const CLI::App* a, const CLI::Error& e) {
    const auto subs = a->get_subcommands();
    return fmt::format("{}: error: {} (see {} {}--help)\n", program, command_line_message(e.what()), program,
                       subs.empty() ? "" : subs.front()->get_name() + " ");
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    return body();
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
