#!/usr/bin/env bash
# Session 15, second call: resnet20 b64's 31 plans of the first call again, 100 iterations a run (20 left
# round-to-round differences up to 19 % on a 4-5 ms iteration), three rounds: a, b reversed, c.
set -u
t_end=$(($(date +%s) + ${1:-300}))
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan
o=$OUT/t15; mkdir -p "$o/r20"
left() { echo $((t_end - $(date +%s))); }
ts() { while IFS= read -r l; do echo "$(date +%H:%M:%S) $l"; done; }
pack() { tar czf "$OUT/t15.tgz.part" -C "$OUT" t15 && mv "$OUT/t15.tgz.part" "$OUT/t15.tgz"; }
{ nvidia-smi -L; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; date -u +%FT%TZ; } >"$o/machine.txt" 2>&1
plans=$(find "$here/r20" -maxdepth 1 -name '*.json' | sort)
for r in a b c; do
  order=$plans; [ "$r" = b ] && order=$(sort -r <<<"$plans")
  for p in $order; do
    [ "$(left)" -gt 10 ] || { echo "round $r: out of time" | ts >>"$o/steps.txt"; break 2; }
    n=$(basename "$p" .json)
    timeout 30 "$U" run "$p" --device cuda --iterations 100 --json >"$o/r20/run-$n-$r.json" 2>"$o/r20/run-$n-$r.err"
    echo "$r $n: exit $?" | ts >>"$o/r20/rounds.log"
  done
  echo "round $r done $(left)" | ts >>"$o/steps.txt"; pack
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$o/gpu-after.txt" 2>&1
echo "end $(left)" | ts >>"$o/steps.txt"; pack
