#!/usr/bin/env bash
# The CUDA build: every CUDA source is compiled with the project's warnings as errors (when the
# build has UCPLAN_WERROR), and every CUDA program links the shared libcudart (the one cuDNN and
# cuBLAS load), never nvcc's default static one beside it.
# Usage: cuda_build_flags.sh BUILD_DIR WERROR(ON|OFF) PROGRAM...
set -euo pipefail
build=$1 werror=$2; shift 2
python3 - "$build/compile_commands.json" "$werror" <<'PY'
import json, sys
cmds = [c for c in json.load(open(sys.argv[1])) if c["file"].endswith(".cu")]
assert cmds, "no .cu file in compile_commands.json"
need = ["-Xcompiler=-Wall,-Wextra,-Wshadow"] + (["--Werror=all-warnings", "-Xcompiler=-Werror"] if sys.argv[2] in ("ON", "1", "TRUE") else [])
for c in cmds:
    missing = [f for f in need if f not in c["command"]]
    if missing:
        sys.exit(f"FAIL: {c['file']} is compiled without {' '.join(missing)}")
print(f"ok: {len(cmds)} CUDA source(s) with {' '.join(need)}")
PY
if grep -q -- "-lcudart_static" "$build/build.ninja"; then
  echo "FAIL: a link line in $build/build.ninja has -lcudart_static"; grep -o -- "build bin/[^:]*:" "$build/build.ninja" | head -3; exit 1
fi
for p in "$@"; do
  # grep without -q reads all of ldd's output: with pipefail, -q's early exit can kill ldd (SIGPIPE) and fail a good binary.
  if ! ldd "$p" | grep "libcudart\.so" >/dev/null; then echo "FAIL: $p does not load the shared libcudart"; exit 1; fi
  if nm "$p" 2>/dev/null | grep " T cudaMalloc$" >/dev/null; then echo "FAIL: $p carries a static cudaMalloc"; exit 1; fi
done
echo "ok: shared cudart only"
