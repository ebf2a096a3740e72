#!/usr/bin/env bash
# Session 35 (2026-11-30), one call on an H200, bundle of HEAD (3c3c04a). Steps, under one deadline,
# packed to $OUT/s35.tgz after each:
#   validate  scripts/gpu-validate.sh resnet20 64 (kernel check, CUDA vs CPU replay, run --check,
#             modern layers, bf16/fp16): HEAD's plans carry the batch's input across rounds, which
#             no GPU has run yet
#   golden    the two golden plans from measured H100 profiles, at 1e2f2f7 (session 15) and at HEAD
#             (the input carried), 20 iterations, rounds a, b (reversed), c
#   eff       efficientnet_b0 b32 (model:h100): keep-all vs the default at 64 GiB, which differ only
#             by the carried input (predicted 13.4 vs 13.0 ms), 50 iterations, rounds a, b, c; a
#             trace of each
#   r20       resnet20 b64 from the profile validate measured here: keep-all at 64 GiB and the
#             default at 100 / 50 / 25 % of the liveness peak (--reserve 0B), 100 iterations, a, b, c
#   effprof   if time is left: efficientnet_b0 b32 profiled here (undivided, repeat 3), its
#             default and keep-all compiled and replayed
set -u
t_end=$(($(date +%s) + ${1:-470}))
here=$(cd "$(dirname "$0")" && pwd)
DEV=${DEV:-cuda}
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan
o=${OUT:-/tmp/out35}/s35; rm -rf "$o"; mkdir -p "$o"
left() { echo $((t_end - $(date +%s))); }
ts() { while IFS= read -r l; do echo "$(date +%H:%M:%S) $l"; done; }
pack() { tar czf "$o.tgz.part" -C "$(dirname "$o")" s35 && mv "$o.tgz.part" "$o.tgz"; }
note() { echo "$* ($(left) s left)" | ts >>"$o/steps.txt"; pack; }
{ nproc; free -g; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,power.limit,ecc.mode.current --format=csv; date -u +%FT%TZ; cat /tmp/g/bundle/VERSION; } >"$o/machine.txt" 2>&1
note start
steps=" ${STEPS:-validate golden eff r20 effprof} "
want() { [[ "$steps" == *" $1 "* ]]; }

# validate
want validate && timeout "$(( $(left) < 300 ? $(left) : 300 ))" env UCPLAN_VALIDATE_DEVICE=$DEV ${VALIDATE_ENV:-} \
  bash /tmp/g/bundle/scripts/gpu-validate.sh "$o/validate" resnet20 64 >"$o/validate.log" 2>&1
want validate && note "validate exit $?"

# rounds DIR NAME ITERATIONS ROUNDS: every plan of DIR replayed, round b in reverse order
rounds() {
  local dir=$1 name=$2 n=$3 r plans order p b
  mkdir -p "$o/$name"
  plans=$(find "$dir" -maxdepth 1 -name '*.json' | sort)
  for r in $4; do
    order=$plans; [ "$r" = b ] && order=$(sort -r <<<"$plans")
    for p in $order; do
      [ "$(left)" -gt 20 ] || { note "$name $r: out of time"; return 1; }
      b=$(basename "$p" .json)
      timeout 90 "$U" run "$p" --device $DEV --iterations "$n" --json >"$o/$name/run-$b-$r.json" 2>"$o/$name/run-$b-$r.err"
      echo "$name $r $b: exit $?" | ts >>"$o/$name/rounds.log"
    done
    note "$name round $r done"
  done
}

# golden: 1e2f2f7's plans beside HEAD's
mkdir -p /tmp/golden
for p in "$here"/old/*.json; do cp "$p" "/tmp/golden/old-$(basename "$p")"; done
for p in /tmp/g/bundle/plans/*measured*.json; do cp "$p" "/tmp/golden/new-$(basename "$p")"; done
want golden && rounds /tmp/golden golden ${GOLDEN_N:-20} "a b c"

# eff: keep-all vs the default (carried input)
mkdir -p /tmp/eff && cp "$here/eff-keep.json" "$here/eff-default.json" /tmp/eff/
want eff && rounds /tmp/eff eff ${EFF_N:-50} "a b c"
for w in keep default; do
  want eff || break
  timeout 60 "$U" run /tmp/eff/eff-$w.json --device $DEV --iterations 3 --trace "$o/eff/trace-$w.json" >"$o/eff/trace-$w.txt" 2>&1
done
note "eff traces done"

# r20: fidelity on this device from its own measured profile
prof=$o/validate/profile-resnet20-b64.json
if want r20 && [ -f "$prof" ]; then
  mkdir -p /tmp/r20 "$o/r20"
  peak=$("$U" inspect resnet20 --batch 64 --json | env -u LD_LIBRARY_PATH python3 -c "import json,sys; print(json.load(sys.stdin)['totals']['liveness_peak_bytes'])")
  "$U" compile resnet20 --batch 64 --profile "$prof" --budget 64GiB --strategy keep-all --reserve 0B -q -o /tmp/r20/keep.json
  for s in 100 50 25; do
    "$U" compile resnet20 --batch 64 --profile "$prof" --budget "$((peak * s / 100))B" --reserve 0B -o /tmp/r20/default-$s.json >"$o/r20/compile-$s.txt" 2>&1
  done
  cp /tmp/r20/*.json "$o/r20/"
  note "r20 compiled"
  rounds /tmp/r20 r20 ${R20_N:-100} "a b c"
fi

# effprof: a measured profile of efficientnet_b0 b32
if want effprof && [ "$(left)" -gt 120 ]; then
  mkdir -p /tmp/ep "$o/effprof"
  timeout $(( $(left) - 70 )) "$U" profile "$here/eff.json" --batch 32 --device $DEV --sizes undivided --repeat 3 -o "$o/effprof/profile.json" >"$o/effprof/profile.txt" 2>&1
  note "effprof profile exit $?"
  if [ -f "$o/effprof/profile.json" ]; then
    "$U" compile "$here/eff.json" --profile "$o/effprof/profile.json" --budget 64GiB --reserve 0B -o /tmp/ep/default.json >"$o/effprof/compile-default.txt" 2>&1
    "$U" compile "$here/eff.json" --profile "$o/effprof/profile.json" --budget 64GiB --reserve 0B --strategy keep-all -o /tmp/ep/keep.json >"$o/effprof/compile-keep.txt" 2>&1
    cp /tmp/ep/*.json "$o/effprof/"
    rounds /tmp/ep effprof ${EFF_N:-50} "a b"
  fi
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$o/gpu-after.txt" 2>&1
note end
