#!/usr/bin/env bash
# Session 8, second call, the same bundle (3ed701e): scripts/gpu-measure.sh resnet50:64:25 (the calibration chain).
set -u
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
UCPLAN_SESSION_STEPS=measure bash /tmp/g/bundle/scripts/gpu-session.sh "$OUT/m" "${1:-240}" >"$OUT/m.log" 2>&1
cp "$OUT/m/session.tgz" "$OUT/m8.tgz"; rm -rf "$OUT/m"
