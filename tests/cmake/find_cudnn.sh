#!/usr/bin/env bash
# FindCUDNN with the layout of the Python wheels (nvidia-cudnn-cu*): include/cudnn_version.h and
# only the versioned lib/libcudnn.so.9, no libcudnn.so. The fake root comes first in the hints,
# so it must win over a real cuDNN in /usr/local/cuda, by its versioned name alone.
# Usage: find_cudnn.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work" && mkdir -p "$work/wheel/include" "$work/wheel/lib"
printf '#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 2\n' > "$work/wheel/include/cudnn_version.h"
: > "$work/wheel/lib/libcudnn.so.9"
cmake -S "$src/tests/cmake/find_cudnn" -B "$work/build" -DUCPLAN_CMAKE_DIR="$src/cmake" -DCUDNN_ROOT="$work/wheel" \
  -DEXPECT_LIBRARY="$work/wheel/lib/libcudnn.so.9" -DEXPECT_VERSION=9.1.2
