#!/usr/bin/env bash
# Every tests/error/NAME.json must make `ucplan inspect` fail with exit code 2 and print, on one
# stderr line, the message in NAME.expected (a fixed substring). Inputs for other commands use
# NAME.cmd (the arguments, with @FILE for the input, @DIR for this folder and @OUT for an empty
# folder of its own, which must still be empty afterwards: no partial or half-written output).
set -u
dir=$(cd "$(dirname "$0")" && pwd)
bin=${UCPLAN_BIN:?set UCPLAN_BIN to the ucplan binary}
fail=0; n=0
for input in "$dir"/*.json; do
  name=$(basename "$input" .json)
  expected_file="$dir/$name.expected"
  [ -f "$expected_file" ] || { echo "FAIL $name: no $name.expected"; fail=1; continue; }
  expected=$(cat "$expected_file")
  out=$(mktemp -d)
  if [ -f "$dir/$name.cmd" ]; then
    args=$(sed "s|@FILE|$input|g; s|@DIR|$dir|g; s|@OUT|$out|g" "$dir/$name.cmd")
  else
    args="inspect $input"
  fi
  # shellcheck disable=SC2086
  err=$(cd "$dir" && "$bin" $args 2>&1 >/dev/null); rc=$?
  n=$((n + 1))
  lines=$(printf '%s\n' "$err" | grep -c .)
  left=$(ls -A "$out"); rm -rf "$out"
  if [ "$rc" -ne 2 ]; then echo "FAIL $name: exit code $rc, expected 2 ($err)"; fail=1
  elif [ -n "$left" ]; then echo "FAIL $name: left files behind: $left"; fail=1
  elif [ "$lines" -ne 1 ]; then echo "FAIL $name: expected one line on stderr, got $lines: $err"; fail=1
  elif [[ "$err" != *"$expected"* ]]; then echo "FAIL $name: got '$err', expected it to contain '$expected'"; fail=1
  else echo "ok   $name: $err"; fi
done
echo "$n error inputs checked"
exit $fail
