#!/usr/bin/env bash
# Set-up on a fresh Debian 12 machine, idempotent: installs what is missing (apt-get for the
# C++ libraries, pip for the JSON Schema validator the tests use), configures and builds.
# Usage: scripts/setup.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build"}

# clang and its runtime libraries: the ASan/UBSan build and the libFuzzer harnesses (scripts/fuzz.sh);
# clang-format: the one style of the tree, checked by scripts/check_format.sh.
packages=(build-essential cmake ninja-build pkg-config coinor-libcbc-dev nlohmann-json3-dev libcli11-dev libfmt-dev
          doctest-dev libopenblas-dev libonnx-dev libprotobuf-dev python3 clang libclang-rt-14-dev clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} with apt-get (a few minutes on a fresh machine)"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! python3 -c "import jsonschema" 2>/dev/null; then
  echo "setup: installing the jsonschema Python package"
  python3 -m pip install --quiet jsonschema 2>/dev/null || python3 -m pip install --quiet --break-system-packages jsonschema
fi

# CUDA is built where nvcc and cuDNN are found (AUTO); nothing here needs a GPU to run. Where a
# CUDA toolkit is installed (/usr/local/cuda/bin/nvcc) it is required (ON): a missing cuDNN then
# fails the configure instead of silently building without the CUDA backend.
# UCPLAN_WITH_CUDA=AUTO|ON|OFF in the environment overrides this.
with_cuda=${UCPLAN_WITH_CUDA:-}
if [ -z "$with_cuda" ]; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then with_cuda=ON; else with_cuda=AUTO; fi
fi
[ -f "$build/build.ninja" ] || echo "setup: configuring $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUCPLAN_WERROR=ON -DUCPLAN_WITH_CUDA="$with_cuda" \
  ${UCPLAN_CMAKE_ARGS:-} >/dev/null
# Progress every 10 steps (a first build takes minutes on 2 cores), every other line as it comes.
cmake --build "$build" -j "$(nproc)" 2>&1 |
  awk '/^\[[0-9]+\/[0-9]+\] / { split(substr($1, 2, length($1) - 2), a, "/");
                                   if (a[1] % 10 == 0 || a[1] == a[2]) { printf "setup: building, step %s of %s\n", a[1], a[2]; fflush() }
                                   next }
       /^ninja: no work to do/ { next }
       { print; fflush() }'
echo "setup: built in $build (ucplan, ucplan-profile, ucplan-run, tests; UCPLAN_WITH_CUDA=$with_cuda)"
