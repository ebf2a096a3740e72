#!/usr/bin/env bash
# Packs ucplan for a GPU machine that has none of this machine's Debian packages (TOOLCHAIN.md):
# builds here (CUDA required), then copies into DIR
#   bin/       ucplan, ucplan-profile, ucplan-run, ucplan-gpu-check, ucplan-cuda-check (stripped)
#   lib/       every library they load that is not glibc's or the NVIDIA driver's: fmt, CBC/Clp/Osi/
#              CoinUtils/Cgl, OpenBLAS + LAPACK, libgfortran, libquadmath, libstdc++, libgcc_s, zlib,
#              bzip2, and the CUDA runtime (libcudart.so.13, the one the binaries were built with)
#   networks/, schemas/, scripts/ (gpu-session.sh, gpu-validate.sh, gpu-measure.sh, gpu-plan-quality.sh,
#              gpu-where.sh), benchmarks/torch_side_by_side.py; of the golden plans and profiles only
#              what gpu-session.sh replays: plans/*measured*.json, and in profiles/ the measured
#              ResNet-50 b64 H100 profile and its calibrated copy, and the ResNet-20 b64 one (the device
#              makes its own, and the bundle must stay under the 64 MiB carry)
#   env.sh     sourced by the launchers: LD_LIBRARY_PATH = lib/ + the gzipped libraries of lib/
#              unpacked (the largest travel so: the 64 MiB carry) + the cuDNN and cuBLAS it finds on
#              the machine, UCPLAN_NETWORKS = networks/
#   ucplan, ucplan-gpu-check, ucplan-cuda-check   launchers (source env.sh, run bin/...)
# cuDNN (~1 GB) and cuBLAS (~600 MB) are NOT packed: env.sh finds them on the machine, in this
# order: UCPLAN_CUDNN_DIR / UCPLAN_CUBLAS_DIR, the CUDA toolkit's folders ($CUDA_HOME,
# /usr/local/cuda*, the distribution's), then the Python wheels under site-packages/nvidia/*
# (PyTorch's), and prints which it uses. Without them the CPU commands still work.
# Usage: scripts/gpu-bundle.sh DIR [--no-build] [--tar]
#   UCPLAN_BUILD_DIR   build folder (default: build)   --no-build  use it as it is
#   --tar              also write DIR.tar.gz
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/gpu-bundle.sh DIR [--no-build] [--tar]}
out=${out%/}  # DIR/ --tar wrote DIR/.tar.gz inside the bundle
shift
build_it=1 tar_it=0
for a in "$@"; do
  case "$a" in
    --no-build) build_it=0 ;;
    --tar) tar_it=1 ;;
    *) echo "gpu-bundle: unknown option $a" >&2; exit 2 ;;
  esac
done
build=${UCPLAN_BUILD_DIR:-$root/build}
programs=(ucplan ucplan-profile ucplan-run ucplan-gpu-check ucplan-cuda-check)
if [ "$build_it" = 1 ]; then
  # Its progress lines stay quiet; a failed build's compiler errors (on its stdout) are shown.
  build_log=$(mktemp)
  if ! UCPLAN_WITH_CUDA=ON "$root/scripts/setup.sh" "$build" >"$build_log" 2>&1; then
    tail -40 "$build_log" >&2
    rm -f "$build_log"
    echo "gpu-bundle: the CUDA build failed (above)" >&2
    exit 1
  fi
  rm -f "$build_log"
fi
for p in "${programs[@]}"; do
  [ -x "$build/bin/$p" ] || { echo "gpu-bundle: $build/bin/$p is missing (a CUDA build is needed)" >&2; exit 1; }
done

# Libraries the machine provides itself: glibc, the dynamic loader, and the NVIDIA driver's. cuDNN
# and cuBLAS are found there by env.sh.
is_system() {
  case "$1" in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libutil.so*|libresolv.so*) return 0 ;;
    libcuda.so*|libnvidia-*) return 0 ;;
    libcudnn*|libcublas*) return 0 ;;
    *) return 1 ;;
  esac
}

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for p in "${programs[@]}"; do
  strip --strip-unneeded -o "$out/bin/$p" "$build/bin/$p"
done
# Every library the programs (and those libraries) load, by soname, from ldd's resolution here.
declare -A packed=()
for p in "${programs[@]}"; do
  while read -r name path; do
    [ -n "$path" ] && [ -f "$path" ] || continue
    is_system "$name" && continue
    [ -n "${packed[$name]:-}" ] && continue
    cp -L "$path" "$out/lib/$name"
    chmod u+w "$out/lib/$name"
    strip --strip-unneeded "$out/lib/$name" 2>/dev/null || true
    packed[$name]=$path
  done < <(ldd "$build/bin/$p" | awk '/=>/ {print $1, $3}')
done

# The largest libraries travel gzipped (OpenBLAS alone is 36.5 MB of a bundle that must stay under
# the 64 MiB carry; gzip -9 takes the four over 2 MiB from 49.0 to 16.0 MB): env.sh unpacks them once
# per bundle, outside it, so a bundle that has been used is still the size it was packed at.
for f in "$out"/lib/*; do
  if [ "$(stat -c %s "$f")" -gt $((2 << 20)) ]; then
    gzip -9 -n "$f"
  fi
done
packed_gz=("$out"/lib/*.gz)
if [ -e "${packed_gz[0]}" ]; then
  (cd "$out/lib" && sha256sum -- "${packed_gz[@]##*/}") > "$out/lib/packed.sha256"
else
  : > "$out/lib/packed.sha256"
fi

cp -r "$root/networks" "$root/schemas" "$out/"
mkdir -p "$out/scripts"
cp "$root/scripts/gpu-session.sh" "$root/scripts/gpu-validate.sh" "$root/scripts/gpu-measure.sh" \
  "$root/scripts/gpu-plan-quality.sh" "$root/scripts/gpu-where.sh" "$root/scripts/validate_json.py" "$out/scripts/"
mkdir -p "$out/plans" "$out/profiles"
cp "$root"/plans/*measured*.json "$out/plans/"
cp "$root/benchmarks/results/gpu-h100/plan-quality/profile-resnet50-b64.json" "$out/profiles/resnet50-b64-h100.json"
cp "$root/profiles/h100/calibrated/resnet50-b64.json" "$out/profiles/resnet50-b64-h100-calibrated.json"
cp "$root/profiles/h100/resnet20-b64.json" "$out/profiles/resnet20-b64-h100.json"
mkdir -p "$out/benchmarks"
cp "$root/benchmarks/torch_side_by_side.py" "$out/benchmarks/"
git -C "$root" rev-parse HEAD > "$out/VERSION" 2>/dev/null || echo unknown > "$out/VERSION"

cat > "$out/env.sh" <<'EOF'
# Sourced by the bundle's launchers: finds cuDNN (libcudnn.so.9) and cuBLAS (libcublas.so.13,
# libcublasLt.so.13), sets LD_LIBRARY_PATH (the bundle's lib/ first) and UCPLAN_NETWORKS, and
# says which it uses on stderr (UCPLAN_BUNDLE_QUIET=1: silent).
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ucplan_say() { [ "${UCPLAN_BUNDLE_QUIET:-0}" = 1 ] || echo "ucplan bundle: $*" >&2; }
# Candidate folders: explicit ones, the CUDA toolkit's, the distribution's, then Python wheels.
ucplan_candidates() {
  local d dirs
  # UCPLAN_CUDA_LIB_DIRS replaces the toolkit folders (empty: none, e.g. to use the wheels).
  dirs="${CUDA_HOME:-}/lib64 ${CUDA_HOME:-}/lib ${CUDA_PATH:-}/lib64 /usr/local/cuda/lib64 /usr/local/cuda/lib"
  dirs="$dirs $(ls -d /usr/local/cuda-*/lib64 2>/dev/null | tr '\n' ' ') /usr/lib/x86_64-linux-gnu"
  for d in ${UCPLAN_CUDA_LIB_DIRS-$dirs}; do
    [ -d "$d" ] && echo "toolkit $d"
  done
  local py=${UCPLAN_PYTHON:-python3}
  if [ "${UCPLAN_NO_WHEELS:-0}" != 1 ] && command -v "$py" >/dev/null 2>&1; then
    local sp
    for sp in $("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null); do
      [ -d "$sp/nvidia" ] || continue
      find "$sp/nvidia" -maxdepth 3 -type d -name 'lib*' 2>/dev/null | sed 's/^/wheel /'
    done
  fi
}
ucplan_find() {  # ucplan_find EXPLICIT_DIR FILE...: the first folder holding every FILE
  local explicit=$1; shift
  if [ -n "$explicit" ]; then echo "explicit $explicit"; return; fi
  local kind d f ok
  while read -r kind d; do
    ok=1
    for f in "$@"; do [ -e "$d/$f" ] || ok=0; done
    if [ "$ok" = 1 ]; then echo "$kind $d"; return; fi
  done < <(ucplan_candidates | awk '!seen[$0]++')
}
# Gzipped libraries (gpu-bundle.sh) unpacked into a folder named by their checksums under
# UCPLAN_BUNDLE_UNPACK (default: TMPDIR or /tmp), once: each is written beside and renamed, so
# launchers started at once do not read a half-written one. gzip, else Python's gzip module.
unpacked="${UCPLAN_BUNDLE_UNPACK:-${TMPDIR:-/tmp}}/ucplan-bundle-$(sha256sum "$bundle/lib/packed.sha256" | cut -c1-16)"
ucplan_gunzip() {  # ucplan_gunzip FILE.gz OUT
  if command -v gzip >/dev/null 2>&1; then
    gzip -dc "$1" > "$2"
  else
    "${UCPLAN_PYTHON:-python3}" -c 'import gzip, shutil, sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
  fi
}
mkdir -p "$unpacked"
for z in "$bundle"/lib/*.gz; do
  [ -e "$z" ] || continue
  lib="$unpacked/$(basename "${z%.gz}")"
  [ -f "$lib" ] && continue
  if ! { ucplan_gunzip "$z" "$lib.$$" && mv -f "$lib.$$" "$lib"; }; then
    rm -f "$lib.$$"
    ucplan_say "cannot unpack $z into $unpacked (UCPLAN_BUNDLE_UNPACK names another folder)"
  fi
done
ld_path="$bundle/lib:$unpacked"
read -r cudnn_kind cudnn_dir < <(ucplan_find "${UCPLAN_CUDNN_DIR:-}" libcudnn.so.9; echo)
read -r cublas_kind cublas_dir < <(ucplan_find "${UCPLAN_CUBLAS_DIR:-}" libcublas.so.13 libcublasLt.so.13; echo)
if [ -n "${cudnn_dir:-}" ]; then
  ucplan_say "cuDNN from $cudnn_dir ($cudnn_kind)"
  ld_path="$ld_path:$cudnn_dir"
else
  ucplan_say "cuDNN (libcudnn.so.9) not found: CUDA commands will fail; set UCPLAN_CUDNN_DIR"
fi
if [ -n "${cublas_dir:-}" ]; then
  ucplan_say "cuBLAS from $cublas_dir ($cublas_kind)"
  [ "$cublas_dir" = "${cudnn_dir:-}" ] || ld_path="$ld_path:$cublas_dir"
else
  ucplan_say "cuBLAS (libcublas.so.13) not found: CUDA commands will fail; set UCPLAN_CUBLAS_DIR"
fi
export LD_LIBRARY_PATH="$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCPLAN_NETWORKS="$bundle/networks"
unset -f ucplan_candidates ucplan_find ucplan_gunzip
EOF
for p in ucplan ucplan-gpu-check ucplan-cuda-check; do
  cat > "$out/$p" <<EOF
#!/usr/bin/env bash
# Runs the bundle's $p with its libraries (env.sh).
source "\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)/env.sh"
exec "\$bundle/bin/$p" "\$@"
EOF
  chmod +x "$out/$p"
done
if [ "$tar_it" = 1 ]; then
  tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
  echo "gpu-bundle: $out.tar.gz $(du -h "$out.tar.gz" | cut -f1)"
fi
echo "gpu-bundle: $out $(du -sh "$out" | cut -f1) (${#packed[@]} libraries packed: ${!packed[*]})"
