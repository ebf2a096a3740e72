#!/usr/bin/env python3
"""A layer too large to run at the largest sizes, end to end: `ucplan profile` writes what did not
fit the device as out of memory and says how many in its summary; the profile reads back, `ucplan
compile` plans at the sizes that ran, and `--sub-batch` at a size that did not run is refused in
one line naming the layer. And a plan larger than the profile's device, each of whose ops fits
(two fc layers of 1.6 * 10^9 weights each, with their gradients, on a 12 GiB K40): compile says it
cannot run there, and `ucplan run --device cpu` refuses its arena in one line where the host's
memory cannot hold it. (An op modelled at more than the 1000 s a profile holds is recorded as
failed: test_profiler, with a runner slower than any model device.)
Usage: too_large.py UCPLAN_BIN"""
import json
import os
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan = sys.argv[1]


def network(name, shape, layers):
    return {"format": "ucplan-network/1", "name": name, "input": {"name": "data", "shape": shape}, "labels": 4,
            "layers": layers + [{"name": "loss", "type": "softmax_loss", "inputs": [layers[-1]["name"]]}]}


# 1400 x 1400 values a sample: a relu holds X and Y, 15.7 MB a sample, so 768 fit the K40's 12 GiB:
# 512 samples do, 1024 do not.
tall = network("tall", [1, 1400, 1400], [{"name": "r", "type": "relu", "inputs": ["data"]},
                                         {"name": "p", "type": "pool", "inputs": ["r"], "mode": "avg",
                                          "global": True},
                                         {"name": "f", "type": "fc", "inputs": ["p"], "out_features": 4}])
wide = network("wide", [40000, 1, 1], [{"name": "f1", "type": "fc", "inputs": ["data"], "out_features": 40000},
                                       {"name": "f2", "type": "fc", "inputs": ["f1"], "out_features": 40000},
                                       {"name": "f", "type": "fc", "inputs": ["f2"], "out_features": 4}])
with tempfile.TemporaryDirectory() as tmp:
    net, prof, plan = (os.path.join(tmp, f) for f in ("tall.json", "profile.json", "plan.json"))
    with open(net, "w") as f:
        json.dump(tall, f)
    r = subprocess.run([ucplan, "profile", net, "--batch", "1024", "--device", "model:k40", "-o", prof],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"profile: {r.stderr.strip()}")
    check("costs (1 out of memory), batch 1024" in r.stdout, f"the summary counts what did not run: {r.stdout.strip()!r}")
    failed = [c for s in json.load(open(prof))["signatures"] for c in s["costs"] if c["status"] != "ok"]
    check(len(failed) == 1 and failed[0]["status"] == "out_of_memory" and failed[0]["batch"] == 1024,
          f"the relu at 1024 samples is out of memory: {failed}")

    r = subprocess.run([ucplan, "compile", net, "--profile", prof, "--budget", "1000TiB", "-q", "-o", plan],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"compile: {r.stderr.strip()}")
    if r.returncode == 0:
        sub_batch = json.load(open(plan))["sub_batch"]
        check(sub_batch < 1024, f"planned at a size that ran, not {sub_batch}")
        c = subprocess.run([ucplan, "check", plan], capture_output=True, text=True)
        check(c.returncode == 0, f"check: {c.stdout.strip()} {c.stderr.strip()}")

    os.remove(plan)
    r = subprocess.run([ucplan, "compile", net, "--profile", prof, "--budget", "1000TiB", "--sub-batch", "1024",
                        "-o", plan], capture_output=True, text=True)
    check(r.returncode == 2, f"--sub-batch 1024: exit {r.returncode}")
    check(r.stderr.count("\n") == 1 and "layer r (forward): ran out of memory at batch 1024 when profiled" in r.stderr,
          f"--sub-batch 1024: one line naming the layer: {r.stderr!r}")
    check(not os.path.exists(plan), "--sub-batch 1024: no plan written")

    # A plan the device cannot hold, though each op fits: said without -q.
    with open(net, "w") as f:
        json.dump(wide, f)
    r = subprocess.run([ucplan, "profile", net, "--batch", "8", "--device", "model:k40", "-o", prof],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "out of memory" not in r.stdout, f"profile of the wide net: {r.stdout} {r.stderr}")
    r = subprocess.run([ucplan, "compile", net, "--profile", prof, "--budget", "1000TiB", "-o", plan],
                       capture_output=True, text=True)
    device = [l for l in r.stdout.splitlines() if l.startswith("  device ")]
    check(len(device) == 1 and "is more than the memory of the profile's device, model k40" in device[0] and
          device[0].endswith("12.0 GiB: it cannot run there"), f"the device line: {device}")
    if r.returncode == 0:
        p = json.load(open(plan))
        need = p["arena_bytes"] + sum(h["size"] for h in p["host_buffers"])
        available = 0
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
        if need > available:  # about 24 GiB: more than most test machines have free
            c = subprocess.run([ucplan, "run", plan, "--device", "cpu"], capture_output=True, text=True)
            check(c.returncode == 2 and c.stderr.count("\n") == 1 and
                  "--device cpu: the plan's arena of " in c.stderr and "of host memory available" in c.stderr,
                  f"run --device cpu refuses the arena in one line: exit {c.returncode}, {c.stderr!r}")

    small, small_prof = os.path.join(tmp, "small.json"), os.path.join(tmp, "small-profile.json")
    with open(small, "w") as f:
        json.dump({**tall, "name": "small", "input": {"name": "data", "shape": [2, 4, 4]}}, f)
    subprocess.run([ucplan, "profile", small, "--batch", "4", "--device", "model:k40", "-o", small_prof], check=True,
                   capture_output=True)
    r = subprocess.run([ucplan, "compile", small, "--profile", small_prof, "--budget", "1000TiB", "-o", plan],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "  device " not in r.stdout, f"a plan the device holds has no device line: {r.stdout}")
finish("too_large: ")
