#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer: a clang build (without
# CUDA) in build-fuzz/ (shared with scripts/fuzz.sh: the same flags also give libFuzzer its
# coverage), then every ctest suite with leaks, overflows and UB fatal.
# Usage: scripts/sanitize.sh [--build-only] [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_only=0; build=""
for a in "$@"; do
  case "$a" in
    --build-only) build_only=1 ;;
    *) build=$a ;;
  esac
done
build=${build:-"$root/build-fuzz"}
command -v clang++ >/dev/null || { echo "sanitize: clang++ is missing (scripts/setup.sh installs it)"; exit 1; }
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [ ! -f "$build/build.ninja" ]; then
  echo "sanitize: configuring $build (clang, ASan + UBSan, no CUDA)"
  # Line tables are all a sanitizer's stack trace needs; full debug information made the build
  # 183 s instead of 163 s on 2 cores. A unity build (CMake joins each target's sources a few at a
  # time, so the headers of json, fmt, doctest and CLI11 are compiled once per group, not per file)
  # took 178 s instead of 216 s, side by side on this machine at 25e9827, and the suite and the
  # fuzzers pass in it. Only here: the Release build compiles every file on its own, so a file
  # that leans on another's includes still fails there.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" -DCMAKE_UNITY_BUILD=ON \
        -DCMAKE_CXX_FLAGS="$flags" -DUCPLAN_WITH_CUDA=OFF -DUCPLAN_FUZZ=ON >/dev/null
fi
echo "sanitize: building in $build"
cmake --build "$build" -j "$(nproc)" > "$build/build.log" 2>&1 || { tail -40 "$build/build.log"; echo "sanitize: the build failed"; exit 1; }
[ "$build_only" -eq 1 ] && exit 0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions="'$root/tests/fuzz/lsan.supp'"}  # quoted: a path with a space
start=$(date +%s)
# Timing assertions (a compile "inspects fast") mean nothing at sanitizer speed; the mutator runs
# in scripts/fuzz.sh. The import pipeline checks (68 torchvision models imported, profiled,
# planned and verified; four replayed on the CPU) take minutes at sanitizer speed and run the code
# that test_import and the executor tests already run here; the Release suite runs them. So do
# the frontier script (dozens of whole compiles of resnet20, minutes here) and the --dump-after
# script (three whole compiles), through the compile path that test_passes runs here too, and
# cli/exact_time_limit (two exact-mode compiles, two minutes here, and it asserts a MILP's
# wall-clock time). Two plan-quality grids of
# test_passes (a larger budget at most 1 % slower; offload allowed never slower than never: 104
# and 72 whole compiles, 92 and 42 s here) assert what the search finds, not how memory is used,
# through the compile path that "every budget from the lower bound ... gives a verified plan" runs
# here on the same four networks. So do, for the same reason, the checks of what a compile reports
# or chooses: cli/budget_reserve and cli/overhead_report (the budget's reserve and the overhead's
# breakdown, 126 and 50 s here), thorough and exact modes never slower than the default and exact
# mode's bound from a larger budget (71 and 26 s; the MILP itself runs here in its brute-force and
# time-limit tests), "placed again" (46 s; every default compile places its plans again), and conv
# outputs recomputed rather than copied on a fast device (43 s; what the search chooses), and the
# search's held values on ResNet-20 (two compiles and a sweep of tables, 8 s in Release; the
# simulator's Hold runs here in the brute-force tests), and the default never slower than a
# baseline strategy (24 s here; the executor's check tests compile and replay superneurons and
# vdnn-all plans here). And the placement search on two real plans (two default compiles of resnet20
# at 35 and 29 % of its peak, then searches of up to its node limit: 155 s here, a third of the
# suite's work; the search itself runs here against brute force on random packings, and in every
# default compile whose pool branch places its plan), and for the same reason the test that on
# ResNet-50 without offload only the pool branch places the plan (one default compile of 176
# layers: 2 s in Release, 44 s here; it asserts which branch the search finds). And the MILP with
# offload against the search on a small network (15 s in Release, 32 s here, nearly all of it in
# CBC, which is not instrumented; it asserts the bound's strength, and the MILP with offload runs
# here against every table of a tiny network in "exact mode's MILP with offload bounds every plan").
# And gpu/measure_script and gpu/session_script: the GPU session scripts' dry runs profile, compile
# and run resnet20 on the CPU through the CLI, whose code the suites above run under the sanitizers
# already, or test a script's plumbing. And cli/large_networks (13 s in Release, 77 s here): it
# times the loaders at 10^5 layers, whose code the fuzzers run here on every kind of input.
# And cli/address_space: AddressSanitizer reserves terabytes of shadow memory, so no program of
# this build starts under the `ulimit -v` that test sets. And the staged plan where no table fits
# (test_executor: 24 s in Release, 329 s here, bisecting over resnet20 compiles; its code runs
# here in every default compile of a small network, which refines stage by stage, and in every
# compile that finds no plan, which tries that staged plan first).
# Without them the sanitizer suite takes about half as long.
(cd "$build" && ctest --output-on-failure -j "$(nproc)" \
  -E "fuzz/plan_mutator|cli/address_space|a plan recomputing in every stage runs|inspect fast|cli/large_networks|gpu/measure_script|gpu/session_script|cli/import_plan_check|cli/import_replay_check|cli/frontier|cli/dump_after|cli/exact_time_limit|cli/budget_reserve|cli/cores|cli/overhead_report|cli/sub_batch_hint|a larger budget gives a plan at most 1 % slower|allowing offload is never slower|thorough and exact modes are never slower|exact mode reports the stronger|placed again, real plans|conv outputs are recomputed rather than copied|a held value is recomputed|never slower than a baseline strategy|stage by stage, the winner gets faster|a refined plan with held values|places a real plan.s buffers|a pool placed after scheduling fits|the MILP with offload bounds a small network")
echo "sanitize: the test suite passed under ASan + UBSan in $(( $(date +%s) - start )) s"
