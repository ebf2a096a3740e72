#!/usr/bin/env python3
"""Every zoo network at every precision (issue 15): profile, plan, verify.

  python3 benchmarks/precision_zoo.py [BUILD] [--cpu-batch N] [--skip-cpu]

For each network of the zoo (networks/*.json) and each precision (fp32, tf32, bf16, fp16,
pseudo-fp16): `ucplan profile` on model:h100 and model:v100 (batch 32, MODELLED) and on this
machine's CPU (batch 1, undivided, MEASURED), `ucplan inspect` for the liveness peak and the lower
bound, `ucplan compile` at the budget halfway between the lower bound and the liveness peak, and
`ucplan check` of the plan (the independent verifier). DeepBench's 94 convolutions
(networks/deepbench/) go through the same on the model devices. Writes
benchmarks/results/precision_zoo.md; any failure is listed there and the script exits 1.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Cli, REPO, fmt_bytes, write_section  # noqa: E402

PRECISIONS = ["fp32", "tf32", "bf16", "fp16", "pseudo-fp16"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build", nargs="?", default=os.path.join(REPO, "build"))
    p.add_argument("--cpu-batch", type=int, default=1)
    p.add_argument("--skip-cpu", action="store_true")
    a = p.parse_args()
    cli = Cli(a.build, log=False)
    nets = sorted(os.path.splitext(os.path.basename(f))[0] for f in glob.glob(os.path.join(REPO, "networks", "*.json")))
    deepbench = sorted("deepbench/" + os.path.splitext(os.path.basename(f))[0]
                       for f in glob.glob(os.path.join(REPO, "networks", "deepbench", "*.json")))
    runs = [(n, d, 32) for n in nets for d in ("model:h100", "model:v100")]
    runs += [(n, "model:h100", 16) for n in deepbench]
    if not a.skip_cpu:
        runs += [(n, "cpu", a.cpu_batch) for n in nets]
    rows, failures, start = {}, [], time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for net, device, batch in runs:
            for prec in PRECISIONS:
                prof = os.path.join(tmp, "p.json")
                plan = os.path.join(tmp, "plan.json")
                extra = ["--sizes", "undivided", "--repeat", "1"] if device == "cpu" else ["--sizes", "powerOfTwo"]

                def run(*args):
                    r = subprocess.run([cli.ucplan, *args], capture_output=True, text=True, cwd=REPO)
                    if r.returncode != 0:
                        raise RuntimeError(f"ucplan {' '.join(args[:2])} ...: {r.stderr.strip()}")
                    return r.stdout
                try:
                    run("profile", net, "--batch", str(batch), "--device", device, "--precision", prec, *extra, "-o", prof)
                    t = json.loads(run("inspect", net, "--batch", str(batch), "--precision", prec, "--json"))["totals"]
                    low, peak = t["lower_bound_bytes"], t["liveness_peak_bytes"]
                    budget = low + (peak - low) // 2
                    run("compile", net, "--profile", prof, "--precision", prec, "--budget", f"{budget}B",
                        "--sub-batch", "any", "--quiet", "-o", plan)
                    run("check", plan)
                    key = (net if not net.startswith("deepbench/") else "deepbench (94 convolutions)", device, batch)
                    r = rows.setdefault(key, {})
                    r.setdefault(prec, [0, peak])[0] += 1
                except RuntimeError as e:
                    failures.append(f"{net} on {device} at {prec}: {e}")
            print(f"{net} on {device}: done ({time.time() - start:.0f} s)", flush=True)
    lines = ["## Every zoo network at every precision (issue 15)", "",
             f"`python3 benchmarks/precision_zoo.py` ({time.time() - start:.0f} s on this machine). For each network, "
             "device and precision: profile, inspect, compile at the budget halfway between the lower bound and the "
             "liveness peak (`--sub-batch any`), and `ucplan check`. Model devices are MODELLED; the CPU profiles are "
             f"measured here at batch {a.cpu_batch} (undivided, one repeat). A cell is the liveness peak at that "
             "precision (DeepBench: plans verified, of 94). At 16 bits activations take half; at batch 1 the weights "
             "dominate, and bf16/fp16/pseudo-fp16 keep a 2-byte copy of the conv and fc weights beside the FP32 "
             "master, so there the peak can grow (AlexNet, VGG and most ResNets on the CPU rows; DenseNet and "
             "ResNet-20, whose activations still dominate, shrink). "
             f"{sum(r[p][0] for r in rows.values() for p in r) + len(failures)} profiles, plans and checks in all.",
             "",
             "| network | device | batch | " + " | ".join(PRECISIONS) + " |",
             "|---|---|---|" + "---|" * len(PRECISIONS)]
    for (net, device, batch), r in rows.items():
        cells = []
        for prec in PRECISIONS:
            if prec not in r:
                cells.append("FAILED")
            elif net.startswith("deepbench"):
                cells.append(f"{r[prec][0]} / 94")
            else:
                cells.append(fmt_bytes(r[prec][1]))
        lines.append(f"| {net} | {device} | {batch} | " + " | ".join(cells) + " |")
    lines += ["", f"Failures: {len(failures)}."] + [f"- {f}" for f in failures] + [""]
    write_section("precision_zoo.md", "\n".join(lines))
    print(f"wrote benchmarks/results/precision_zoo.md; {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
