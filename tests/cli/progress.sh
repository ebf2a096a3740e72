#!/usr/bin/env bash
# The progress line of compile and frontier: on a terminal (a pseudo-terminal from script(1)),
# stderr says what is being done, erased again before the report; into a pipe, nothing is added.
# Usage: progress.sh UCPLAN SOURCE_DIR WORK_DIR
set -euo pipefail
ucplan=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
# resnet20 at batch 8 on the K40 model: quick compiles (exact mode's are its MILPs' time limits).
profile="$work/resnet20-b8-k40.json"
"$ucplan" profile resnet20 --batch 8 --device model:k40 -o "$profile" > /dev/null
on_terminal() {  # the command's output through a pseudo-terminal: stdout and stderr together
  script -qefc "$*" /dev/null | tr -d '\r'
}
fail() { echo "FAIL: $1"; exit 1; }

# Exact mode under a short limit: the search, then each MILP with its limit, then the rest.
out=$(on_terminal "$ucplan" compile resnet20 --profile "$profile" --budget 6MiB --solver exact --time-limit 1s \
        -o "$work/exact.json")
for step in "sub-batch 8: exact mode, the search that seeds the MILP" \
            "sub-batch 8: exact mode, the recompute-only MILP (CBC for up to " \
            "sub-batch 8: exact mode, the MILP with offload (CBC for up to "; do
  grep -qF "$step" <<<"$out" || fail "no progress line \"$step\" on a terminal: $out"
done
grep -q $'\e\[K  memory' <<<"$out" || grep -q $'\e\[Kresnet20: batch 8' <<<"$out" ||
  fail "the progress line is not erased before the report: $out"

# Into a pipe: the same compile (fast) writes nothing to stderr.
"$ucplan" compile resnet20 --profile "$profile" --budget 6MiB --solver fast -o "$work/fast.json" \
  > "$work/stdout.txt" 2> "$work/stderr.txt"
[ ! -s "$work/stderr.txt" ] || fail "compile into a pipe wrote to stderr: $(cat "$work/stderr.txt")"
grep -q $'\e' "$work/stdout.txt" && fail "compile into a pipe wrote escape codes"

# frontier: each budget as it is compiled, then the table and knees as before.
out=$(on_terminal "$ucplan" frontier resnet20 --profile "$profile" --points 2 --solver fast)
grep -qF "budget 1 of 2: " <<<"$out" || fail "frontier shows no budget being compiled: $out"
grep -qF "budget 2 of 2: " <<<"$out" || fail "frontier shows no second budget: $out"
"$ucplan" frontier resnet20 --profile "$profile" --points 2 --solver fast --json > "$work/frontier.json" 2> "$work/stderr.txt"
[ ! -s "$work/stderr.txt" ] || fail "frontier into a pipe wrote to stderr: $(cat "$work/stderr.txt")"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$work/frontier.json"
echo "ok: progress lines on a terminal only"
