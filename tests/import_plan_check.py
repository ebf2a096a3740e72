#!/usr/bin/env python3
"""Imported torchvision networks go through the whole pipeline: `ucplan import` of the
weight-free ONNX files in tests/data/onnx, a modelled H100 profile at batch 64, a plan at 50 % of
the network's liveness peak (`ucplan inspect`), and the independent verifier (`ucplan check`).
With --replay (the 64x64 files in tests/data/onnx/small): a CPU profile at batch 2 instead, and
the plan is run on the CPU with `ucplan run --check` against the reference gradients.
With --part K/N, only every N-th model from the K-th (ctest runs the check in parts, in parallel).
Usage: import_plan_check.py UCPLAN_BIN [--replay] [--part K/N] (MODEL... | --all)"""
import json
import os
import subprocess
import sys
import tempfile
import time

ucplan, args = sys.argv[1], sys.argv[2:]
replay = "--replay" in args
args = [a for a in args if a != "--replay"]
part, parts = 1, 1
if "--part" in args:
    i = args.index("--part")
    part, parts = (int(v) for v in args[i + 1].split("/"))
    if not 1 <= part <= parts:
        sys.exit(f"import_plan_check.py: --part {args[i + 1]}: K must be from 1 to N")
    del args[i:i + 2]
data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "onnx", *(["small"] if replay else []))
models = sorted(json.load(open(os.path.join(data, "torchvision.json")))["models"]) if args == ["--all"] else args
models = models[part - 1::parts]
batch = 2 if replay else 64
device = "cpu" if replay else "model:h100"


def run(*argv):
    r = subprocess.run([ucplan, *argv], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL ucplan {' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
        sys.exit(1)
    return r.stdout


with tempfile.TemporaryDirectory() as tmp:
    for m in models:
        start = time.monotonic()
        net, profile, plan = (os.path.join(tmp, f"{m}{s}.json") for s in ("", "-profile", "-plan"))
        run("import", os.path.join(data, m + ".onnx"), "-o", net)
        run("profile", net, "--batch", str(batch), "--device", device, "--sizes", "powerOfTwo", "-o", profile)
        totals = json.loads(run("inspect", net, "--batch", str(batch), "--json"))["totals"]
        peak = totals["liveness_peak_bytes"]
        # No plan exists below the lower bound: weights and gradients + the largest task at the
        # smallest sub-batch (moDNN Eq. 2). Batch-norm networks keep the batch whole by default (its
        # statistics would change); where that needs more than half the peak (VGG-11-BN) the plan
        # may split the batch (--sub-batch any). Where weights alone are more than half the peak
        # (AlexNet: 489 MB of weights and gradients), the plan is made at the bound instead.
        has_bn = any(l["type"] == "bn" for l in json.load(open(net))["layers"])
        split = has_bn and totals["largest_task_at_batch_bytes"] > peak // 2
        budget = max(peak // 2, totals["lower_bound_bytes"])
        why = "50 % of the liveness peak" if budget == peak // 2 else "the lower bound, above 50 % of the liveness peak"
        if split:
            why += ", batch-norm split into sub-batches"
        # --solver fast: one search branch, as the check is of the import and the plan's validity
        # (the search's quality is tested on the zoo's networks), single-threaded and several times faster.
        run("compile", net, "--profile", profile, "--budget", f"{budget}B", "--solver", "fast", "--quiet", "-o", plan,
            *(["--sub-batch", "any"] if split else []))
        done = run("check", plan).strip()
        if replay:
            report = run("run", plan, "--check")
            checks = [line.strip() for line in report.splitlines() if line.strip().startswith("check")]
            if not checks or "PASSED" not in checks[0]:
                print(f"FAIL {m}: ucplan run --check did not pass:\n{report}")
                sys.exit(1)
            done = checks[0]
        print(f"ok   {m}: plan at {budget} B ({why}; liveness peak {peak} B at batch {batch}), "
              f"{time.monotonic() - start:.1f} s: {done}", flush=True)
