#!/usr/bin/env bash
# `ucplan networks`: the table stays narrow (each description cut to its first 72 characters at a
# space), and --json gives every description whole, as the network file has it.
# Usage: networks.sh UCPLAN SOURCE_DIR
set -euo pipefail
ucplan=$1 src=$2
table=$("$ucplan" networks)
widest=$(awk '{ if (length($0) > w) w = length($0) } END { print w }' <<<"$table")
[ "$widest" -le 160 ] || { echo "FAIL: a line of the table is $widest characters wide"; exit 1; }
grep -q "^alexnet .*AlexNet as trained in the Caffe model zoo.*\.\.\.$" <<<"$table" ||
  { echo "FAIL: alexnet's description is not cut with '...'"; exit 1; }
"$ucplan" networks --json | python3 -c '
import json, sys
listed = {n["name"]: n["description"] for n in json.load(sys.stdin)}
whole = json.load(open(sys.argv[1] + "/networks/alexnet.json"))["description"]
assert listed["alexnet"] == whole, "the JSON description is not the file'"'"'s"
' "$src"
echo "ok: networks table narrow, JSON whole"
