#!/usr/bin/env python3
"""`ucplan compile`'s report says where the overhead over the ideal comes from: recomputation,
compute waiting, conv configurations with less workspace than the fastest, and sub-batch rounds
and updates. The four add up to the overhead, and the configurations' share agrees with the plan
file's own kernels (time_ns - fastest_ns per round), computed here independently: nothing under
a per-kernel workspace limit of 0 bytes, something under one that starves the convolutions. The
transfers line's wait for the batch's copy agrees with the plan's first compute step.
Usage: overhead_report.py UCPLAN_BIN PROFILE NETWORK"""
import json
import os
import re
import subprocess
import sys
import tempfile

from checks import check, finish, ns  # tests/cli/checks.py

ucplan, profile, network = sys.argv[1:4]


def percents(text):
    return [float(x) for x in re.findall(r"\(([+-]?[0-9.]+) %\)", text)]


with tempfile.TemporaryDirectory() as tmp:
    plan_path = os.path.join(tmp, "plan.json")
    shares = {}
    waits_seen = 0
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
        # The transfers line says how long the first layer waits for the batch's copy; the plan's
        # steps say it too (the first compute step's start, each round), and it is compute waiting.
        transfers = next((l for l in r.stdout.splitlines() if l.strip().startswith("transfers ")), "")
        waits = re.findall(r"the first layer waits ([0-9.]+ [mun]?s) for them", transfers)
        first = min(st["start_ns"] for st in plan["steps"] if st["stream"] == "compute" and not st.get("final"))
        check(len(waits) == (1 if first > 0 else 0), f"{name}: the batch's wait in {transfers!r}")
        if waits:
            waits_seen += 1
            expect = plan["rounds"] * first
            check(abs(ns(waits[0]) - expect) <= 0.006 * expect, f"{name}: waits {waits[0]}, the plan's steps {expect} ns")
            check(ns(waits[0]) <= (parts[1] / 100 + 0.001) * s["ideal_ns"], f"{name}: the wait is more than compute waits")
    check(waits_seen > 0, "no report said how long its first layer waits for the batch")
    check(shares.get("starved", 0) > shares.get("unlimited", 0),
          f"a 0-byte workspace limit costs more in configurations than none: {shares}")

finish("overhead report: ")
