#!/usr/bin/env python3
"""`ucplan compile`'s report says where the overhead over the ideal comes from: recomputation,
compute waiting, conv configurations with less workspace than the fastest, and sub-batch rounds
and updates. The four add up to the overhead, and the configurations' share agrees with the plan
file's own kernels (time_ns - fastest_ns per round), computed here independently: nothing under
a per-kernel workspace limit of 0 bytes, something under one that starves the convolutions.
Usage: overhead_report.py UCPLAN_BIN PROFILE NETWORK"""
import json
import os
import re
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan, profile, network = sys.argv[1:4]


def percents(text):
    return [float(x) for x in re.findall(r"\(([+-]?[0-9.]+) %\)", text)]


with tempfile.TemporaryDirectory() as tmp:
    plan_path = os.path.join(tmp, "plan.json")
    shares = {}
    for name, options in [("tight", ["--budget", "20MiB"]), ("unlimited", ["--budget", "1GiB"]),
                          ("starved", ["--budget", "1GiB", "--workspace", "wr:0B"])]:
        r = subprocess.run([ucplan, "compile", network, "--profile", profile, "-o", plan_path, *options],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{name}: compile: {r.stderr.strip()}")
        if r.returncode != 0:
            continue
        plan = json.load(open(plan_path))
        s = plan["summary"]
        total = 100 * (s["predicted_ns"] / s["ideal_ns"] - 1)
        line = next((l for l in r.stdout.splitlines() if l.strip().startswith("overhead ")), "")
        if total < 0.05:
            continue  # no overhead to explain
        parts = percents(line)
        check(len(parts) == 4, f"{name}: four shares in {line!r}")
        if len(parts) != 4:
            continue
        # Each share is printed to 0.1 %: their sum is the overhead to within 0.2 %.
        check(abs(sum(parts) - total) <= 0.2, f"{name}: shares {parts} add up to {sum(parts):.1f} %, not {total:.1f} %")
        configs = sum(k["time_ns"] - k["fastest_ns"] for k in plan["kernels"])
        expect = 100 * plan["rounds"] * configs / s["ideal_ns"]
        check(abs(parts[2] - expect) <= 0.06, f"{name}: configurations' share {parts[2]} %, the plan's kernels say "
                                              f"{expect:.2f} %")
        shares[name] = parts[2]
    check(shares.get("starved", 0) > shares.get("unlimited", 0),
          f"a 0-byte workspace limit costs more in configurations than none: {shares}")

finish("overhead report: ")
