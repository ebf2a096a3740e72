#!/usr/bin/env python3
"""A layer too large to measure at the largest sizes, end to end: `ucplan profile` writes what did not
run as failed (here an op modelled at over the 1000 s a profile holds) and says how many in its
summary; the profile reads back, and `ucplan compile` plans at the sizes that ran, saying the plan
cannot run on the profile's device (and `ucplan run --device cpu` refuses its arena in one line);
`--sub-batch` at a size that did not run is refused in one line naming the layer.
Usage: too_large.py UCPLAN_BIN"""
import json
import os
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan = sys.argv[1]
# 2^36 values a sample (the most a tensor may hold): its relu at a batch of 1024 moves 512 TiB,
# about 1,400 s on the K40 model.
network = {"format": "ucplan-network/1", "name": "huge", "input": {"name": "data", "shape": [1, 262144, 262144]},
           "labels": 4, "layers": [
               {"name": "r", "type": "relu", "inputs": ["data"]},
               {"name": "p", "type": "pool", "inputs": ["r"], "mode": "avg", "global": True},
               {"name": "f", "type": "fc", "inputs": ["p"], "out_features": 4},
               {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]}
with tempfile.TemporaryDirectory() as tmp:
    net, prof, plan = (os.path.join(tmp, f) for f in ("huge.json", "profile.json", "plan.json"))
    with open(net, "w") as f:
        json.dump(network, f)
    r = subprocess.run([ucplan, "profile", net, "--batch", "1024", "--device", "model:k40", "-o", prof],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"profile: {r.stderr.strip()}")
    check("costs (3 failed), batch 1024" in r.stdout, f"the summary counts what did not run: {r.stdout.strip()!r}")
    failed = [c for s in json.load(open(prof))["signatures"] for c in s["costs"] if c["status"] != "ok"]
    check(len(failed) == 3 and all("more than the 1000 s a profile holds for one op" in c["status"] for c in failed),
          f"the ops over 1000 s are failed: {failed}")

    r = subprocess.run([ucplan, "compile", net, "--profile", prof, "--budget", "1000TiB", "-q", "-o", plan],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"compile: {r.stderr.strip()}")
    if r.returncode == 0:
        sub_batch = json.load(open(plan))["sub_batch"]
        check(sub_batch < 1024, f"planned at a size that ran, not {sub_batch}")
        c = subprocess.run([ucplan, "check", plan], capture_output=True, text=True)
        check(c.returncode == 0, f"check: {c.stdout.strip()} {c.stderr.strip()}")
        # Its arena (hundreds of TiB) is refused by the CPU backend before anything is allocated.
        c = subprocess.run([ucplan, "run", plan, "--device", "cpu"], capture_output=True, text=True)
        check(c.returncode == 2 and c.stderr.count("\n") == 1 and
              "--device cpu: the plan's arena of " in c.stderr and "of host memory available" in c.stderr,
              f"run --device cpu refuses the arena in one line: exit {c.returncode}, {c.stderr!r}")

    # Without -q, the report says the plan cannot run on the profile's device (a K40's 12 GiB).
    r = subprocess.run([ucplan, "compile", net, "--profile", prof, "--budget", "1000TiB", "-o", plan],
                       capture_output=True, text=True)
    device = [l for l in r.stdout.splitlines() if l.startswith("  device ")]
    check(len(device) == 1 and "is more than the memory of the profile's device, model k40" in device[0] and
          device[0].endswith("12.0 GiB: it cannot run there"), f"the device line: {device}")
    small, small_prof = os.path.join(tmp, "chain3.json"), os.path.join(tmp, "chain3-profile.json")
    with open(small, "w") as f:
        json.dump({**network, "name": "small", "input": {"name": "data", "shape": [2, 4, 4]}}, f)
    subprocess.run([ucplan, "profile", small, "--batch", "4", "--device", "model:k40", "-o", small_prof], check=True,
                   capture_output=True)
    r = subprocess.run([ucplan, "compile", small, "--profile", small_prof, "--budget", "1000TiB", "-o", plan],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "  device " not in r.stdout, f"a plan the device holds has no device line: {r.stdout}")

    os.remove(plan)
    r = subprocess.run([ucplan, "compile", net, "--profile", prof, "--budget", "1000TiB", "--sub-batch", "1024",
                        "-o", plan], capture_output=True, text=True)
    check(r.returncode == 2, f"--sub-batch 1024: exit {r.returncode}")
    check(r.stderr.count("\n") == 1 and
          "layer r (forward): its measurement at batch 1024 did not run (failed: " in r.stderr,
          f"--sub-batch 1024: one line naming the layer: {r.stderr!r}")
    check(not os.path.exists(plan), "--sub-batch 1024: no plan written")
finish("too_large: ")
