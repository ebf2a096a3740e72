#!/usr/bin/env python3
"""compile --conv-only: the policies it reports are the ones the profile and --micro-batches allow,
and --pareto with --json gives the front as JSON (a front: workspace rising, time falling).
Usage: conv_only.py UCPLAN_BIN"""
import json
import os
import subprocess
import sys

from checks import check, finish  # tests/cli/checks.py

ucplan = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
profile = os.path.join(here, "..", "..", "profiles", "model", "resnet20-b64-k40.json")  # powerOfTwo sizes


def report(*extra):
    r = subprocess.run([ucplan, "compile", "resnet20", "--profile", profile, "--conv-only", "--json", *extra],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"--conv-only {extra}: {r.stderr.strip()}")
    return json.loads(r.stdout) if r.returncode == 0 else {"results": []}


for asked, want in (("undivided", ["undivided"]), ("powerOfTwo", ["undivided", "powerOfTwo"]),
                    ("all", ["undivided", "powerOfTwo"])):  # the profile has no finer sizes than powerOfTwo
    got = [r["policy"] for r in report("--micro-batches", asked, "--workspace", "wr:64MiB")["results"]]
    check(got == want, f"--micro-batches {asked}: policies {got}, expected {want}")

front = report("--pareto", "layer1.0.conv1:forward").get("pareto", {}).get("front", [])
check(len(front) >= 2, f"--pareto --json: a front of {len(front)} entries")
for a, b in zip(front, front[1:]):
    check(a["workspace_bytes"] < b["workspace_bytes"] and a["time_ns"] > b["time_ns"],
          f"--pareto --json: {a} then {b} is not a front")
finish("conv_only: ")
