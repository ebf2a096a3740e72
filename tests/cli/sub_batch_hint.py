#!/usr/bin/env python3
"""`ucplan compile`'s report estimates splitting a batch-norm network's batch ("would help
--sub-batch N: T or less"). The estimate is a plan that a compile with --sub-batch N must match or
beat: each hint is checked against that compile, and the report must give the estimates' own time
beside the compile's. Usage: sub_batch_hint.py UCPLAN_BIN PROFILE NETWORK BUDGET...
PROFILE: a profile file, or model:NAME@BATCH for a modelled profile made here."""
import json
import os
import re
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan, profile, network, budgets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
HINT = re.compile(r"would help\s+--sub-batch (\d+): ([\d.]+) (ns|us|ms|s) or less, in (\d+) rounds")

hints = 0
with tempfile.TemporaryDirectory() as tmp:
    plan_path = os.path.join(tmp, "plan.json")
    if profile.startswith("model:"):
        device, batch = profile.split("@")
        profile = os.path.join(tmp, "profile.json")
        subprocess.run([ucplan, "profile", network, "--batch", batch, "--device", device, "-o", profile], check=True,
                       capture_output=True)
    for budget in budgets:
        r = subprocess.run([ucplan, "compile", network, "--profile", profile, "--budget", budget, "-o", plan_path],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{budget}: compile: {r.stderr.strip()}")
        m = HINT.search(r.stdout)
        done = next((l for l in r.stdout.splitlines() if l.strip().startswith("compiled in")), "")
        check(bool(m) == ("for the estimates above" in done),
              f"{budget}: the estimates' time is given only beside the line they make: {done!r}")
        if r.returncode != 0 or not m:
            continue
        hints += 1
        n, estimate, rounds = int(m.group(1)), float(m.group(2)) * UNITS[m.group(3)], int(m.group(4))
        q = subprocess.run([ucplan, "compile", network, "--profile", profile, "--budget", budget, "--sub-batch",
                            str(n), "-q", "-o", plan_path], capture_output=True, text=True)
        check(q.returncode == 0, f"{budget}: compile --sub-batch {n}: {q.stderr.strip()}")
        if q.returncode != 0:
            continue
        plan = json.load(open(plan_path))
        got = plan["summary"]["predicted_ns"] * 1e-9
        # The report prints three significant digits: the estimate is within half a unit of the last.
        slack = 0.5 * 10 ** (len(str(int(float(m.group(2))))) - 3) * UNITS[m.group(3)]
        check(got <= estimate + slack, f"{budget}: --sub-batch {n} compiles to {got:.6g} s, over the report's "
                                       f"estimate of {estimate:.6g} s")
        check(plan["rounds"] == rounds, f"{budget}: --sub-batch {n} runs {plan['rounds']} rounds, the report said "
                                        f"{rounds}")
check(hints > 0, f"no budget of {budgets} gave a sub-batch hint: the test checks nothing")
finish(f"sub-batch hints ({hints} checked): ")
