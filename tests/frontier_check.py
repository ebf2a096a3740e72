#!/usr/bin/env python3
"""`ucplan frontier` end to end: the JSON curve is ordered by budget, its envelope never gets slower as
the budget grows, every envelope point is a plan that fits its budget, a point is what a compile at
its budget alone gives (the budgets compile side by side), the knees agree with the envelope, the
last budget's plan is no slower than the plan with unlimited memory, and the SVG is well-formed XML.
A threshold no budget reaches because the batch's copy to the device alone exceeds it (DeepBench's
first convolution: a large input, little compute) says so. The curve is made with --solver fast (one
search branch per budget): what is checked here is the frontier's own logic, and the default
search's plans are checked by test_passes.  Usage: frontier_check.py UCPLAN PROFILE NETWORK"""
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli"))
from checks import ns  # noqa: E402  (tests/cli/checks.py)

ucplan, profile, network = sys.argv[1:4]
with tempfile.TemporaryDirectory() as d:
    svg = os.path.join(d, "f.svg")
    out = subprocess.run([ucplan, "frontier", network, "--profile", profile, "--points", "8", "--solver", "fast", "--json",
                          "--svg", svg],
                         capture_output=True, text=True, check=True).stdout
    j = json.loads(out)
    ET.parse(svg)
    # The budgets compile side by side: each point is what a compile at that budget alone gives.
    for p in j["points"][::3]:
        plan = os.path.join(d, "p.json")
        rc = subprocess.run([ucplan, "compile", network, "--profile", profile, "--budget", f"{p['budget_bytes']}B",
                             "--solver", "fast", "-q", "-o", plan], capture_output=True, text=True).returncode
        assert (rc == 0) == p["ok"], (p, rc)
        if rc == 0:
            with open(plan) as f:
                summary = json.load(f)["summary"]
            for key in ["predicted_ns", "peak_bytes", "recompute_ns", "offload_bytes"]:
                assert summary[key] == p[key], (key, summary[key], p)
assert j["solver"] == "fast", j["solver"]
pts = j["points"]
assert len(pts) == 8, len(pts)
budgets = [p["budget_bytes"] for p in pts]
# From the first budget with a plan to where more memory stops helping: the larger of the keep-all
# peak and the peak of the plan with unlimited memory (which may carry the batch's input).
assert budgets == sorted(budgets) and budgets[0] == j["smallest_budget_bytes"], budgets
assert budgets[-1] == j["largest_budget_bytes"] == max(j["keep_all_peak_bytes"], j["unlimited_memory_peak_bytes"]), j
assert j["lower_bound_bytes"] <= j["smallest_budget_bytes"], j
env = [p["envelope_overhead"] for p in pts if p["envelope_overhead"] is not None]
assert env, "no budget has a plan"
assert all(a >= b for a, b in zip(env, env[1:])), f"envelope not monotone: {env}"
for p in pts:
    if p["ok"]:
        assert p["peak_bytes"] <= p["budget_bytes"], p
    if p["envelope_budget_bytes"] is not None:
        assert p["envelope_budget_bytes"] <= p["budget_bytes"], p
for k in j["knees"]:
    first = next((p["budget_bytes"] for p in pts if p["envelope_overhead"] is not None
                  and p["envelope_overhead"] <= k["overhead_at_most"]), None)
    assert first == k["budget_bytes"], (k, first)
assert j["unlimited_memory_ns"] >= j["ideal_ns"], j
assert env[-1] >= j["unlimited_memory_ns"] / j["ideal_ns"] - 1 - 1e-9, (env, j["unlimited_memory_ns"])
# The last budget holds the plan with unlimited memory, so its plan is no slower than that one (a
# quick search had placed its buffers while scheduling and lost the fastest workspace there).
assert pts[-1]["ok"] and pts[-1]["predicted_ns"] <= j["unlimited_memory_ns"], (pts[-1], j["unlimited_memory_ns"])

# DeepBench conv01: with unlimited memory the plan waits for its input and nothing else (a copy
# longer than the round's compute: carrying it across rounds, plan.h, cannot hide it).
with tempfile.TemporaryDirectory() as d:
    prof, plan = os.path.join(d, "p.json"), os.path.join(d, "plan.json")
    subprocess.run([ucplan, "profile", "deepbench/conv01", "--batch", "4", "--device", "model:h100", "-o", prof],
                   capture_output=True, check=True)
    text = subprocess.run([ucplan, "frontier", "deepbench/conv01", "--profile", prof, "--points", "2", "--solver",
                           "fast"], capture_output=True, text=True, check=True).stdout
    subprocess.run([ucplan, "compile", "deepbench/conv01", "--profile", prof, "--budget", "1TiB", "--solver", "fast",
                    "-q", "-o", plan], capture_output=True, check=True)
    with open(plan) as f:
        p = json.load(f)
    first = min(st["start_ns"] for st in p["steps"] if st["stream"] == "compute" and not st.get("final"))
    unlimited = p["summary"]["predicted_ns"] / p["summary"]["ideal_ns"] - 1
    assert unlimited > 0.01 and first > 0, (unlimited, first)
    line = next(l for l in text.splitlines() if l.strip().startswith("within +1.0 %"))
    assert f"at none: with unlimited memory the plan is +{100 * unlimited:.1f} % over the ideal" in line, line
    waits = re.findall(r"first layer waiting ([0-9.]+ [mun]?s) for the batch's copy", line)
    assert len(waits) == 1 and abs(ns(waits[0]) - first) <= 0.006 * first, (line, first)  # three digits

    # A baseline that recomputes whatever the memory (superneurons): the line for a threshold no
    # budget reaches says what its plan with unlimited memory still does.
    text = subprocess.run([ucplan, "frontier", network, "--profile", profile, "--points", "2", "--strategy",
                           "superneurons"], capture_output=True, text=True, check=True).stdout
    line = next(l for l in text.splitlines() if l.strip().startswith("within +1.0 %"))
    assert "at none: with unlimited memory the plan is" in line and ", recomputing for " in line, line

    # DeepBench conv09 at batch 1, keep-all: its budgets are 512 B apart, which three digits print
    # alike ("1.50 MiB" three times); the rows and the header say them in bytes.
    subprocess.run([ucplan, "profile", "deepbench/conv09", "--batch", "1", "--device", "model:k40", "-o", prof],
                   capture_output=True, check=True)
    text = subprocess.run([ucplan, "frontier", "deepbench/conv09", "--profile", prof, "--strategy", "keep-all",
                           "--points", "3"], capture_output=True, text=True, check=True).stdout
    rows = [l.split()[0] for l in text.splitlines()[2:5]]
    assert len(set(rows)) == 3 and all(r[0].isdigit() for r in rows), text
    assert text.splitlines()[0].count(" B") == 2, text

print(f"frontier ok: {len(pts)} points, envelope {env[0]:+.3f} -> {env[-1]:+.3f}")
