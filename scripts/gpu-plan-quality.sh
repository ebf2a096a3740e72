#!/usr/bin/env bash
# Plan quality on the device: the default search, exact mode and every baseline compiled from a
# measured profile at shares of the liveness peak, then replayed on the GPU side by side.
#   scripts/gpu-plan-quality.sh compile PROFILE DIR [NET [BATCH]]   here (no GPU): DIR/STRATEGY-SHARE.json
#       at 100 / 85 / 70 / 50 / 35 / 25 % of the liveness peak (`ucplan inspect`), --reserve 0B so the
#       budget is the arena's; exact mode with --time-limit 60s. A strategy without a plan at a share
#       is left out (its reason printed).
#   scripts/gpu-plan-quality.sh run DIR OUT                          there (bundle or CUDA build):
#       every DIR/*.json replayed with `ucplan run --device cuda --iterations 20 --json` in two rounds,
#       the second in reverse order (so drift of clocks or temperature shows as a difference between
#       rounds instead of favouring one strategy): OUT/run-NAME-a.json and OUT/run-NAME-b.json.
# benchmarks/gpu_results.py (part F) tabulates what comes back.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/gpu-where.sh
source "$here/gpu-where.sh"
usage="usage: scripts/gpu-plan-quality.sh compile PROFILE DIR [NET [BATCH]] | run DIR OUT"
case "${1:-}" in
  compile)
    profile=${2:?$usage} dir=${3:?$usage} net=${4:-resnet50} batch=${5:-64}
    mkdir -p "$dir"
    peak=$("$bin/ucplan" inspect "$net" --batch "$batch" --json |
      env -u LD_LIBRARY_PATH python3 -c "import json,sys; print(json.load(sys.stdin)['totals']['liveness_peak_bytes'])") || exit 1
    for share in 100 85 70 50 35 25; do
      budget=$((peak * share / 100))
      for strategy in ucplan exact keep-all vdnn-all vdnn-conv superneurons checkpoint-sqrt; do
        how=(--strategy "$strategy")
        [ "$strategy" = exact ] && how=(--solver exact --time-limit 60s)
        t0=$(date +%s)
        if "$bin/ucplan" compile "$net" --batch "$batch" --profile "$profile" --budget "${budget}B" --reserve 0B \
          "${how[@]}" -q -o "$dir/$strategy-$share.json" 2>"$dir/.why"; then
          echo "$share % $strategy: compiled in $(($(date +%s) - t0)) s"
        else
          echo "$share % $strategy: no plan: $(tail -1 "$dir/.why")"
        fi
      done
    done
    rm -f "$dir/.why"
    ;;
  run)
    dir=${2:?$usage} out=${3:?$usage}
    mkdir -p "$out"
    mapfile -t plans < <(find "$dir" -maxdepth 1 -name '*.json' | sort)
    [ ${#plans[@]} -gt 0 ] || { echo "gpu-plan-quality: no plans in $dir" >&2; exit 2; }
    failed=0
    for round in a b; do
      order=("${plans[@]}")
      [ "$round" = b ] && mapfile -t order < <(printf '%s\n' "${plans[@]}" | sort -r)
      for plan in "${order[@]}"; do
        name=$(basename "$plan" .json)
        timeout 120 "$bin/ucplan" run "$plan" --device cuda --iterations 20 --json >"$out/run-$name-$round.json" \
          2>"$out/run-$name-$round.err"
        rc=$?
        echo "round $round $name: exit $rc"
        [ "$rc" -eq 0 ] || failed=$((failed + 1))
      done
    done
    echo "gpu-plan-quality: $failed of $((2 * ${#plans[@]})) runs failed"
    [ "$failed" -eq 0 ] || exit 1
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
