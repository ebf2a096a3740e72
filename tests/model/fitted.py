#!/usr/bin/env python3
"""model:h100-fit against the measurements it was fitted to (profiler/model_device.h, FITTED DEVICES).
  fitted.py UCPLAN REPO WORK
1. Its factors are the data's: for every (layer type, op), the factor model:h100-fit applies (its
   seconds over model:h100's, which must be the same for every entry of the class) equals, to 3
   decimals, the median of measured over model:h100 seconds over the entries the four measured H100
   profiles (profiles/h100/{resnet50-b128,vgg16-b64,alexnet-b256,resnet18-b128}.json) share with
   model:h100's profiles of the same networks.
2. It predicts the H100 better: each of the three networks whose keep-all plan was replayed on the
   H100 (benchmarks/results/gpu-h100/run-NET-100.json, measured medians of 20) is predicted within
   15 % of what it measured by a keep-all plan from model:h100-fit, where model:h100 is 32-47 % off.
"""
import collections
import json
import os
import statistics
import subprocess
import sys

ucplan, repo, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
NETWORKS = [("resnet50", 128), ("vgg16", 64), ("alexnet", 256), ("resnet18", 128)]
failures = []


def run(*args):
    subprocess.run([ucplan, *args], check=True, capture_output=True, text=True)


def profile(net, batch, device):
    path = os.path.join(work, f"{net}-b{batch}-{device}.json")
    run("profile", net, "--batch", str(batch), "--device", f"model:{device}", "--sizes", "powerOfTwo", "-o", path)
    return json.load(open(path))


def entries(p):
    return {(s["signature"], c["op"], c["algo"], c["batch"]): (s["type"], c["seconds"])
            for s in p["signatures"] for c in s["costs"] if c.get("status") == "ok"}


ratios = collections.defaultdict(list)
applied = collections.defaultdict(set)
for net, batch in NETWORKS:
    measured = entries(json.load(open(os.path.join(repo, "profiles", "h100", f"{net}-b{batch}.json"))))
    model = entries(profile(net, batch, "h100"))
    fit = entries(profile(net, batch, "h100-fit"))
    for key, (kind, seconds) in model.items():
        if seconds > 0:
            applied[(kind, key[1])].add(round(fit[key][1] / seconds, 3))
            if key in measured:
                ratios[(kind, key[1])].append(measured[key][1] / seconds)
for cls, values in sorted(ratios.items()):
    want = round(statistics.median(values), 3)
    got = applied.get(cls, {1.0})
    if len(got) != 1 or abs(next(iter(got)) - want) > 5e-4:
        failures.append(f"{cls}: model:h100-fit applies {sorted(got)}, the data's median is {want} "
                        f"({len(values)} entries)")
    else:
        print(f"ok   {cls[0]} {cls[1]}: factor {want} = median of {len(values)} measured / modelled")

for net, batch in NETWORKS[:3]:
    run_report = json.load(open(os.path.join(repo, "benchmarks", "results", "gpu-h100", f"run-{net}-b{batch}-100.json")))
    measured = run_report["median_seconds"]
    predicted = {}
    for device in ("h100", "h100-fit"):
        plan = os.path.join(work, f"{net}-{device}-keep.json")
        run("compile", net, "--batch", str(batch), "--profile", os.path.join(work, f"{net}-b{batch}-{device}.json"),
            "--budget", "64GiB", "--strategy", "keep-all", "-q", "-o", plan)
        predicted[device] = json.load(open(plan))["summary"]["predicted_ns"] * 1e-9
    line = (f"{net} b{batch} keep-all: measured {measured * 1e3:.1f} ms, model:h100 {predicted['h100'] * 1e3:.1f} ms "
            f"({measured / predicted['h100']:.2f}x), model:h100-fit {predicted['h100-fit'] * 1e3:.1f} ms "
            f"({measured / predicted['h100-fit']:.2f}x)")
    if abs(measured / predicted["h100-fit"] - 1) > 0.15:
        failures.append(line)
    else:
        print("ok   " + line)

for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
