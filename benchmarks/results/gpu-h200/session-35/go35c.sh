#!/usr/bin/env bash
# Session 35, third call: traces of the plans that CUDA graphs slowed (ResNet-50 b128 golden, resnet20
# b64 default at 25 %), without and with graphs, 3 iterations each, the last traced.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan P=$here/plans
o=${OUT:-/tmp/out35c}/s35c; rm -rf "$o"; mkdir -p "$o"
for p in /tmp/g/bundle/plans/resnet50-b128-h100measured-2914mb.json "$P/default-25.json" "$P/r20-sb.json"; do
  b=$(basename "$p" .json)
  for g in off on; do
    flag=--no-cuda-graphs; [ "$g" = on ] && flag=--cuda-graphs
    timeout 60 "$U" run "$p" --device cuda --iterations 3 $flag --trace "$o/trace-$b-$g.json" >"$o/trace-$b-$g.txt" 2>&1
    echo "$b $g exit $?"
  done
done
tar czf "$OUT/s35c.tgz" -C "$(dirname "$o")" s35c
