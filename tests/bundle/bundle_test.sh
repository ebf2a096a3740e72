#!/usr/bin/env bash
# scripts/gpu-bundle.sh, tested where there is no GPU: the bundle is under 64 MiB (the device
# transfer limit), its launcher finds cuDNN and cuBLAS in Python wheels (a fake site-packages
# whose nvidia/*/lib link to this machine's libraries) with the toolkit folders hidden, and its
# CPU commands (profile -> compile -> run --check) work from a clean folder, loading every
# library from the bundle (its gzipped ones unpacked outside it), the wheels or glibc: none of this
# machine's Debian packages.
# Usage: bundle_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
UCPLAN_BUILD_DIR=$build "$src/scripts/gpu-bundle.sh" "$work/bundle" --no-build
size=$(du -sb "$work/bundle" | cut -f1)
echo "bundle: $size bytes"
[ "$size" -lt $((64 << 20)) ] || { echo "FAIL: the bundle is $size bytes, over 64 MiB"; exit 1; }

# Fake wheels: the layouts of nvidia-cudnn-cu13 (nvidia/cudnn/lib) and of CUDA 13's cuBLAS wheel
# (nvidia/cu13/lib), linking to the real libraries.
real_cudnn=$(ldd "$build/bin/ucplan-run" | awk '$1 == "libcudnn.so.9" {print $3}')
real_cublas=$(ldd "$build/bin/ucplan-run" | awk '$1 == "libcublas.so.13" {print $3}')
[ -n "$real_cudnn" ] && [ -n "$real_cublas" ] || { echo "FAIL: ucplan-run does not link cuDNN and cuBLAS here"; exit 1; }
site=$work/site
mkdir -p "$site/nvidia/cudnn/lib" "$site/nvidia/cu13/lib"
touch "$site/nvidia/cudnn/__init__.py"
for f in "$(dirname "$real_cudnn")"/libcudnn*.so.9*; do ln -s "$f" "$site/nvidia/cudnn/lib/"; done
for f in "$(dirname "$real_cublas")"/libcublas*.so.13*; do ln -s "$f" "$site/nvidia/cu13/lib/"; done

clean=$work/clean
mkdir -p "$clean" "$work/ld"
cd "$clean"
run() {  # the bundle's launcher with a bare environment, the toolkit folders hidden
  env -i PATH=/usr/bin:/bin HOME="$work" PYTHONPATH="$site" UCPLAN_CUDA_LIB_DIRS= LD_DEBUG=libs \
    LD_DEBUG_OUTPUT="$work/ld/trace" UCPLAN_BUNDLE_UNPACK="$work/unpacked" "$work/bundle/ucplan" "$@"
}
run profile resnet20 --batch 4 --device cpu --sizes undivided --repeat 1 -o p.json 2> launcher.txt
cat launcher.txt
grep -q "cuDNN from $site/nvidia/cudnn/lib (wheel)" launcher.txt || { echo "FAIL: cuDNN not taken from the wheel"; exit 1; }
grep -q "cuBLAS from $site/nvidia/cu13/lib (wheel)" launcher.txt || { echo "FAIL: cuBLAS not taken from the wheel"; exit 1; }
run compile resnet20 --profile p.json --budget 8MiB -o plan.json 2>/dev/null
run run plan.json --check --iterations 1 2>/dev/null | tee run.txt
grep -q "check       PASSED" run.txt || { echo "FAIL: run --check did not pass"; exit 1; }

# The gzipped libraries were unpacked outside the bundle, which is the size it was packed at; where
# there is no gzip, Python's module unpacks the same bytes.
[ "$(du -sb "$work/bundle" | cut -f1)" = "$size" ] || { echo "FAIL: the bundle grew when used"; exit 1; }
mkdir -p "$work/no-gzip"
for f in /usr/bin/*; do [ "$(basename "$f")" = gzip ] || ln -s "$f" "$work/no-gzip/"; done
env -i PATH="$work/no-gzip" HOME="$work" PYTHONPATH="$site" UCPLAN_CUDA_LIB_DIRS= UCPLAN_BUNDLE_QUIET=1 \
  UCPLAN_BUNDLE_UNPACK="$work/unpacked-py" "$work/bundle/ucplan" --version
diff -r "$work/unpacked" "$work/unpacked-py" || { echo "FAIL: Python unpacked other bytes than gzip"; exit 1; }
ls "$work"/unpacked/ucplan-bundle-*/libopenblas.so.0 >/dev/null || { echo "FAIL: OpenBLAS was not unpacked"; exit 1; }

# Where every library a ucplan program loaded came from. LD_DEBUG=libs writes, per process, the
# "calling init: LIB" lines of a program and then "initialize program: PROGRAM"; the launcher's
# own tools (env, bash, python3, find) are the machine's and are left out.
python3 - "$work" "$site" <<'PY'
import glob, re, sys
work, site = sys.argv[1], sys.argv[2]
ok_system = re.compile(r"/(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1)$")
programs, libs = set(), set()
for path in glob.glob(work + "/ld/trace.*"):
    pending = []
    for line in open(path, errors="replace"):
        m = re.search(r"calling init: (\S+)", line)
        if m:
            pending.append(m.group(1))
        m = re.search(r"initialize program: (\S+)", line)
        if m:
            if "/bundle/bin/ucplan" in m.group(1):
                programs.add(m.group(1).rsplit("/", 1)[-1])
                libs.update(pending)
            pending = []
want = {"ucplan", "ucplan-profile", "ucplan-run"}
if not want <= programs:
    sys.exit(f"FAIL: traces of {sorted(want - programs)} are missing (found {sorted(programs)})")
bad = [l for l in sorted(libs) if not (l.startswith(work + "/bundle/lib/") or l.startswith(work + "/unpacked/")
                                      or l.startswith(site + "/") or ok_system.search(l))]
for l in bad:
    print("FAIL: loaded from outside the bundle:", l)
if bad:
    sys.exit(1)
print(f"ok: {', '.join(sorted(programs))} loaded {len(libs)} libraries, all from the bundle, the wheels or glibc")
PY
