#!/usr/bin/env bash
# The measurements of a GPU session, in one call, from a bundle (scripts/gpu-bundle.sh) or a
# checkout with a CUDA build. Writes into OUT:
#   profile-NET-bB.json   measured profiles (--device cuda, powerOfTwo micro-batches, 5 repeats)
#   plan-NET-bB-SHARE.json  plans at the keep-all peak and at shares of it (+ the profile's reserve
#                         for the CUDA context and libraries, which compile keeps out of the budget)
#   run-NET-bB-SHARE.json ucplan run --device cuda --iterations 20 --json of each plan
#   trace-NET-bB-SHARE.json, profile-NET-bB-calibrated.json, plan-/run-NET-bB-SHARE-calibrated.json
#                         the tightest plan that copies, traced; the profile's copy lines and launch
#                         gap refit to its run (ucplan calibrate); every share compiled and run again from it
#   torch-NET-bB.jsonl    benchmarks/torch_side_by_side.py on the same device, same network and batch
#   log.txt               every command with its output and seconds
# Usage: scripts/gpu-measure.sh OUT [NET:BATCH[:SHARES]]...  (default resnet50:128:100,50,25)
#   SHARES: comma-separated percentages of the keep-all peak to compile and run at; none: profile only.
#   UCPLAN_MEASURE_TORCH=0 leaves PyTorch out; UCPLAN_MEASURE_CALIBRATE=0 the calibration.
#   UCPLAN_MEASURE_DEVICE=cpu (with UCPLAN_MEASURE_SIZES=undivided UCPLAN_MEASURE_REPEAT=1
#   UCPLAN_MEASURE_ITERATIONS=2 UCPLAN_MEASURE_SOLVER=fast): a dry run of every step on the CPU, for
#   the script's own test (tests/gpu/measure_test.sh).
set -uo pipefail
out=${1:?usage: scripts/gpu-measure.sh OUT [NET:BATCH[:SHARES]]...}
shift
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=("resnet50:128:100,50,25")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/gpu-where.sh
source "$here/gpu-where.sh"
torch_script=$root/benchmarks/torch_side_by_side.py
device=${UCPLAN_MEASURE_DEVICE:-cuda}
sizes=${UCPLAN_MEASURE_SIZES:-powerOfTwo}
repeat=${UCPLAN_MEASURE_REPEAT:-5}
iterations=${UCPLAN_MEASURE_ITERATIONS:-20}
solver=${UCPLAN_MEASURE_SOLVER:-default}
mkdir -p "$out"
log=$out/log.txt
# A run into an OUT used before starts afresh: its runs, traces and calibrated files would otherwise
# be read as this run's (JSON reports are written whole, never appended).
rm -f "$log" "$out"/run-*.json "$out"/trace-*.json "$out"/*-calibrated.json "$out"/torch-*.jsonl
failures=0
py() { env -u LD_LIBRARY_PATH python3 "$@"; }  # the machine's Python, not the bundle's libraries
run() {  # LIMIT STDOUT COMMAND...: logged with its time (STDOUT - : into the log); its exit status returned
  local limit=$1 dest=$2 t0 rc; shift 2
  [ "$dest" = - ] && dest=$log
  t0=$(date +%s.%N)
  echo "== $*" >>"$log"
  if [ "$dest" = "$log" ]; then
    timeout "$limit" "$@" >>"$log" 2>&1
  else
    timeout "$limit" "$@" >"$dest" 2>>"$log"
  fi
  rc=$?
  [ "$rc" -eq 0 ] || failures=$((failures + 1))
  echo "== exit $rc in $(py -c "print(round($(date +%s.%N) - $t0, 1))") s" >>"$log"
  return $rc
}
field() { py -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }

for job in "${jobs[@]}"; do
  IFS=: read -r net batch shares <<<"$job"
  profile=$out/profile-$net-b$batch.json
  run 400 - "$bin/ucplan" profile "$net" --batch "$batch" --device "$device" --sizes "$sizes" --repeat "$repeat" \
    -o "$profile" || continue
  if [ -z "${shares:-}" ] || [ "$shares" = none ]; then continue; fi  # profile only (no PyTorch either)
  keep=$out/plan-$net-b$batch-keep-all.json
  run 120 - "$bin/ucplan" compile "$net" --profile "$profile" --budget 64GiB --strategy keep-all -o "$keep" || continue
  peak=$(field "$keep" "d['summary']['peak_bytes']")
  reserve=$(field "$profile" "d['device']['versions'].get('device_overhead_bytes', 0)")
  IFS=, read -ra list <<<"$shares"
  for s in "${list[@]}"; do
    plan=$out/plan-$net-b$batch-$s.json
    budget=$(( peak * s / 100 + reserve ))
    echo "== $net b$batch at $s % of the keep-all peak $peak B + reserve $reserve B: budget $budget B" >>"$log"
    run 300 - "$bin/ucplan" compile "$net" --profile "$profile" --budget "${budget}B" --solver "$solver" -o "$plan" || continue
    run 200 "$out/run-$net-b$batch-$s.json" "$bin/ucplan" run "$plan" --device "$device" --iterations "$iterations" --json
  done
  # The plans' copies run beside their own kernels, slower than the profiler's copies alone (an H100:
  # 1.06-1.13x), and the compute stream idles between kernels (about 1.25 us each): the tightest plan
  # that copies is traced, the profile calibrated to its run (copies and launch gap), and every share
  # compiled from the calibrated profile and run again, beside the first.
  tight=""
  for s in "${list[@]}"; do
    r=$out/run-$net-b$batch-$s.json
    [ -s "$r" ] && [ "$(field "$r" "d['bytes_d2h'] > 0")" = True ] && tight=$s
  done
  if [ "${UCPLAN_MEASURE_CALIBRATE:-1}" = 1 ] && [ -n "$tight" ]; then
    trace=$out/trace-$net-b$batch-$tight.json
    calibrated=$out/profile-$net-b$batch-calibrated.json
    if run 200 - "$bin/ucplan" run "$out/plan-$net-b$batch-$tight.json" --device "$device" --iterations 3 --trace "$trace" &&
      run 60 - "$bin/ucplan" calibrate "$profile" -t "$trace" -o "$calibrated"; then
      for s in "${list[@]}"; do
        plan=$out/plan-$net-b$batch-$s-calibrated.json
        run 300 - "$bin/ucplan" compile "$net" --profile "$calibrated" --budget "$(( peak * s / 100 + reserve ))B" --solver "$solver" -o "$plan" || continue
        run 200 "$out/run-$net-b$batch-$s-calibrated.json" "$bin/ucplan" run "$plan" --device "$device" --iterations "$iterations" --json
      done
    fi
  fi
  if [ "${UCPLAN_MEASURE_TORCH:-1}" = 1 ]; then
    run 600 "$out/torch-$net-b$batch.jsonl" env -u LD_LIBRARY_PATH python3 "$torch_script" "$net" "$batch"
  fi
done
echo "gpu-measure: done, $failures command(s) failed; $out/log.txt"
[ "$failures" -eq 0 ]
