# Sourced by the GPU scripts (gpu-session.sh, gpu-validate.sh, gpu-measure.sh, gpu-plan-quality.sh)
# with `here` set to their folder: where ucplan and its files are.
#   inside a bundle (scripts/gpu-bundle.sh): env.sh is sourced (LD_LIBRARY_PATH, UCPLAN_NETWORKS),
#     root = the bundle, bin = its bin/, in_bundle = 1
#   in a checkout: root = the checkout, bin = UCPLAN_BUILD_DIR/bin (default build/bin), in_bundle = 0
# shellcheck shell=bash
# shellcheck disable=SC2034 # root, bin and in_bundle are read by the script that sources this
# shellcheck disable=SC2154 # here: set by the script that sources this
if [ -f "$here/../env.sh" ]; then
  # shellcheck disable=SC1091
  source "$here/../env.sh"
  # shellcheck disable=SC2154 # bundle: set by env.sh
  root=$bundle
  bin=$bundle/bin
  in_bundle=1
else
  root=$(cd "$here/.." && pwd)
  bin=${UCPLAN_BUILD_DIR:-$root/build}/bin
  in_bundle=0
fi
