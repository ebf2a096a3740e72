#!/usr/bin/env bash
# The adversary of issue 12, run on demand: a clang build with ASan + UBSan (and libFuzzer
# coverage) in build-fuzz/, then
#  1. the plan mutator: N mutants of valid plans; every one the verifier accepts must replay
#     with correct gradients and intact inputs (and, here, without a sanitizer report);
#  2. libFuzzer on the network, profile and plan loaders (the plan's also runs the verifier) and
#     the ONNX importer.
# Usage: scripts/fuzz.sh [--quick] [--mutants N] [--runs N] [BUILD_DIR]
#   --quick: what CI runs (scripts/test.sh): 300 mutants and 20,000 inputs per loader (8,000 for
#            the ONNX importer), seeded.
#   default: 5,000 mutants and 1,000,000 inputs per loader (about an hour on 2 cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mutants=5000; runs=1000000; quick=0; build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; mutants=300; runs=20000 ;;
    --mutants) mutants=$2; shift ;;
    --runs) runs=$2; shift ;;
    *) build=$1 ;;
  esac
  shift
done
build=${build:-"$root/build-fuzz"}
"$root/scripts/sanitize.sh" --build-only "$build"
build=$(cd "$build" && pwd)  # the fuzzers run from a scratch folder: a relative path would not reach them
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions="'$root/tests/fuzz/lsan.supp'"}  # quoted: a path with a space
start=$(date +%s)
echo "fuzz: plan mutator, $mutants mutants (ASan + UBSan)"
"$build/bin/ucplan-plan-mutator" --mutants "$mutants" --seed 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for kind in network profile plan onnx; do
  # A copy of the seed corpus: libFuzzer adds what it finds to the first folder it is given.
  cp -r "$root/tests/fuzz/corpus/$kind" "$work/$kind"
  # JSON loaders: text with the dictionary's keys; ONNX: protobuf, mutated mostly as a parsed model
  # (fuzz_onnx.cpp's own mutator), seeded with exports of up to 58 KiB. An ONNX input takes about
  # three times a JSON one, so the quick run gives it 8,000 (5 s) to keep CI's time.
  n=$runs
  if [ "$kind" = onnx ]; then
    opts=(-max_len=65536)
    [ "$quick" = 1 ] && n=8000
  else
    opts=(-max_len=16384 -dict="$root/tests/fuzz/json.dict")
  fi
  echo "fuzz: $kind loader, $n inputs"
  (cd "$work" && "$build/bin/fuzz_$kind" -seed=1 -runs="$n" "${opts[@]}" \
       -print_final_stats=1 "$work/$kind" > "$work/$kind.log" 2>&1 || true)
  grep -E "^(stat::number_of_executed_units|stat::new_units_added|==|SUMMARY|Done)" "$work/$kind.log" || true
  # grep hides libFuzzer's chatter; a finding leaves a crash-* file and a non-zero status.
  if ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* >/dev/null 2>&1; then
    mkdir -p "$root/build-fuzz-findings"; cp "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$root/build-fuzz-findings/" 2>/dev/null || true
    echo "fuzz: $kind loader: FINDING (inputs copied to build-fuzz-findings/)"; exit 1
  fi
  # A fuzzer that did not run (missing, or stopped by something other than a finding) is a failure,
  # not a pass: it must have reported the inputs it executed.
  grep -q "^stat::number_of_executed_units: $n\$" "$work/$kind.log" ||
    { tail -20 "$work/$kind.log"; echo "fuzz: $kind loader: did not run its $n inputs"; exit 1; }
done
echo "fuzz: all passed in $(( $(date +%s) - start )) s"
