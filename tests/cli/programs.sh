#!/usr/bin/env bash
# Every program says a bad command line alike (planner/model/program.h): one line on stderr,
# "PROGRAM: error: WHAT (see PROGRAM [SUBCOMMAND ]--help)", exit code 2, nothing on stdout (a
# mistyped command named, with the commands there are); CLI11's own wording for a value it
# cannot take is rewritten, and options that would be ignored are refused;
# --help prints its usage on stdout and exits 0; --version names the version, in each program.
# Usage: programs.sh UCPLAN
set -uo pipefail
ucplan=$1
fail=0
expect_bad() {  # prefix help-hint args...
  local prefix=$1 hint=$2
  shift 2
  local out err rc lines
  err=$(mktemp)
  out=$("$ucplan" "$@" 2>"$err")
  rc=$?
  lines=$(grep -c . "$err")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || [ -n "$out" ] ||
    ! grep -q "^$prefix: error: .*bogus.* (see $hint --help)$" "$err"; then
    echo "FAIL ucplan $*: exit $rc, stdout '$out', stderr: $(cat "$err")"
    fail=1
  else
    echo "ok   ucplan $*: $(cat "$err")"
  fi
  rm -f "$err"
}
expect_said() {  # message args...: exit code 2 and one stderr line holding the message
  local message=$1 err rc
  shift
  err=$("$ucplan" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ] || [ "$(grep -c . <<<"$err")" -ne 1 ] || [[ "$err" != *"$message"* ]]; then
    echo "FAIL ucplan $*: exit $rc, expected one line holding '$message', got: $err"
    fail=1
  else
    echo "ok   ucplan $*: $err"
  fi
}
expect_ok() {  # pattern args...: exit code 0 and a line of stdout matching the pattern
  local pattern=$1 out rc
  shift
  out=$("$ucplan" "$@" 2>/dev/null)
  rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "$pattern" <<<"$out"; then
    echo "FAIL ucplan $*: exit $rc, no line '$pattern' on stdout"
    fail=1
  else
    echo "ok   ucplan $*"
  fi
}
expect_bad "ucplan" "ucplan" bogus
expect_bad "ucplan" "ucplan networks" --bogus networks
expect_bad "ucplan" "ucplan compile" compile resnet20 --profile p.json --budget 1GiB -o /dev/null --bogus
expect_bad "ucplan" "ucplan check" check plan.json --bogus
expect_bad "ucplan profile" "ucplan profile" profile resnet20 --batch 4 --bogus -o /dev/null
expect_bad "ucplan run" "ucplan run" run plan.json --bogus
expect_bad "ucplan import" "ucplan import" import model.onnx --bogus -o /dev/null
# CLI11's own wording for a value it cannot take is said the planner's way (errors.h).
expect_said '--points: expected a whole number from 2 to 200, got "abc"' frontier resnet20 --profile p.json --points abc
# Counts are decimal, as sizes are: CLI11 alone read 010 as octal 8, 0x10 as 16 and took +8.
expect_said '--batch: expected a whole number from 1 to 65536, got "0x10"' inspect resnet20 --batch 0x10
expect_said '--iterations: expected a whole number from 1 to 100000, got "+5"' run plan.json -n +5
expect_said '--repeat: expected a whole number from 1 to 1000, got "1e2"' profile resnet20 --batch 2 --repeat 1e2 -o x.json
expect_said '--batch: expected a whole number from 1 to 65536, got "1.5"' profile resnet20 --batch 1.5 -o x.json
expect_said '--budget: needs a value' compile resnet20 --profile p.json -o x.json --budget
expect_said '--fit: expected all, copies or launch, got "both"' calibrate p.json -t t.json -o x.json --fit both
expect_said '--budget: given 2 times; give it once' compile resnet20 --profile p.json --budget 1GiB --budget 2GiB
# Options that would be ignored are refused before the plan is read.
expect_said '--tolerance: only with --check' run plan.json --tolerance 0.1
expect_said '--no-poison: only with --check' run plan.json --no-poison
expect_said '--exact: only with --device cuda' run plan.json --exact
expect_ok "batch 10:" inspect resnet20 --batch 010
for command in compile check profile run import; do expect_ok "^Usage: " "$command" --help; done
expect_ok "^Usage: " --help
expect_ok "^ucplan [0-9]" --version
for command in profile run import; do expect_ok "^ucplan [0-9]" "$command" --version; done
exit $fail
