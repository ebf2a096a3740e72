#!/usr/bin/env bash
# The progress line of compile and frontier: on a terminal (a pseudo-terminal from script(1)),
# stderr says what is being done, erased again before the report; into a pipe, nothing is added.
# And run --check's stage lines, which are a log and go to stderr wherever it goes.
# Usage: progress.sh UCPLAN SOURCE_DIR WORK_DIR
set -euo pipefail
ucplan=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
# A three-layer network with batch norm (batch 4, K40 model): every compile takes milliseconds,
# exact mode's MILPs included, and the lines are those of any network.
net="$src/tests/error/inputs/chain3bn.json"
profile="$src/tests/error/inputs/chain3bn-b4-k40.json"
on_terminal() {  # the command's output through a pseudo-terminal: stdout and stderr together
  script -qefc "$*" /dev/null | tr -d '\r'
}
fail() { echo "FAIL: $1"; exit 1; }

# Exact mode: the search, then the MILPs with their limit (side by side where the machine has two
# cores or more, else one after the other), then the rest; erased before the report.
out=$(on_terminal "$ucplan" compile "$net" --profile "$profile" --budget 1MiB --solver exact --time-limit 1s \
        -o "$work/exact.json")
for step in "sub-batch 4: exact mode, the search that seeds the MILP" \
            "sub-batch 4: exact mode, the MILP's solution simulated and searched from"; do
  grep -qF "$step" <<<"$out" || fail "no progress line \"$step\" on a terminal: $out"
done
if ! grep -qF "exact mode, the recompute-only MILP and the MILP with offload side by side (CBC for up to 1.00 s)" \
     <<<"$out"; then
  for step in "sub-batch 4: exact mode, the recompute-only MILP (CBC for up to 1.00 s)" \
              "sub-batch 4: exact mode, the MILP with offload (CBC for up to 1.00 s)"; do
    grep -qF "$step" <<<"$out" || fail "no progress line for the MILPs (\"$step\") on a terminal: $out"
  done
fi
grep -q $'\e\[Kchain3bn: batch 4' <<<"$out" || fail "the progress line is not erased before the report: $out"

# Into a pipe: the same compile writes nothing to stderr and no escape codes.
"$ucplan" compile "$net" --profile "$profile" --budget 1MiB --solver exact --time-limit 1s -o "$work/piped.json" \
  > "$work/stdout.txt" 2> "$work/stderr.txt"
[ ! -s "$work/stderr.txt" ] || fail "compile into a pipe wrote to stderr: $(cat "$work/stderr.txt")"
if grep -q $'\e' "$work/stdout.txt"; then fail "compile into a pipe wrote escape codes"; fi

# frontier: each budget as it is compiled, then the table as before; --json into a pipe stays clean.
out=$(on_terminal "$ucplan" frontier "$net" --profile "$profile" --points 2)
grep -qF "budget 1 of 2: " <<<"$out" || fail "frontier shows no budget being compiled: $out"
grep -qF "budget 2 of 2: " <<<"$out" || fail "frontier shows no second budget: $out"
"$ucplan" frontier "$net" --profile "$profile" --points 2 --json > "$work/frontier.json" 2> "$work/stderr.txt"
[ ! -s "$work/stderr.txt" ] || fail "frontier into a pipe wrote to stderr: $(cat "$work/stderr.txt")"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$work/frontier.json"
# run --check: a line per stage of each checked iteration with its seconds, on stderr into a pipe
# too (a log of minutes of CPU references, not a line that is erased), and stdout stays the JSON.
"$ucplan" profile "$net" --batch 4 --device cpu -o "$work/cpu.json" >/dev/null
"$ucplan" compile "$net" --profile "$work/cpu.json" --budget 1MiB -q -o "$work/cpu-plan.json"
"$ucplan" run "$work/cpu-plan.json" --check --json --iterations 1 > "$work/run.json" 2> "$work/stderr.txt"
for i in 1 2; do
  for stage in "the plan's 1 round ran in" "the reference ran on the CPU in"; do
    grep -qE "^ucplan run: check: iteration $i of 2: $stage [0-9.]+ s$" "$work/stderr.txt" ||
      fail "run --check printed no \"iteration $i of 2: $stage\" line: $(cat "$work/stderr.txt")"
  done
done
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['check']['passed']" "$work/run.json"
echo "ok: progress lines on a terminal only; run --check's stage lines on stderr"
