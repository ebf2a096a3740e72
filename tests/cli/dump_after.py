#!/usr/bin/env python3
"""`ucplan compile --dump-after STAGE`: each stage writes one JSON document to stdout, in the
order `compile --help` lists them, and what it says agrees with `ucplan inspect` (liveness peak,
lower bound) and with the plan compiled without the flag (schedule). Without -o the compile stops
after the stage; with -o it also writes the plan, the one compiled without the flag. An unknown
stage is one line, exit code 2. Usage: dump_after.py UCPLAN_BIN PROFILE NETWORK"""
import json
import os
import re
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan, profile, network = sys.argv[1:4]


def run(*argv):
    return subprocess.run([ucplan, *argv], capture_output=True, text=True)


help_text = run("compile", "--help").stdout
m = re.search(r"--dump-after TEXT\s+write the JSON of one pipeline stage to stdout: ([a-z| -]+)", help_text)
stages = [s.strip() for s in m.group(1).split("|")] if m else []
check(re.search(r"without -o or --trace the\s+compile stops after that stage", help_text) is not None,
      "--help says that without -o the compile stops after the stage")
check(stages == ["graph", "liveness", "lower-bound", "conv-configs", "sub-batch", "schedule"],
      f"--help lists the stages in execution order: {stages}")
with tempfile.TemporaryDirectory() as tmp:
    plan = os.path.join(tmp, "plan.json")
    # One search branch (--solver fast): what is tested is the stages and the plan written, not the
    # search, and three whole compiles with the default took most of this test's 20 s.
    base = ["compile", network, "--profile", profile, "--budget", "64MiB", "--solver", "fast"]
    batch = json.load(open(profile))["batch"]
    totals = json.loads(run("inspect", network, "--batch", str(batch), "--json").stdout)["totals"]
    plain = run(*base, "-o", plan)
    check(plain.returncode == 0, f"compile without --dump-after: {plain.stderr.strip()}")
    plain_plan = open(plan).read()
    os.remove(plan)  # written again below, with --dump-after
    dumps = {}
    for s in stages:
        r = run(*base, "--dump-after", s)
        check(r.returncode == 0, f"--dump-after {s}: exit {r.returncode} {r.stderr.strip()}")
        try:
            dumps[s] = json.loads(r.stdout)
        except json.JSONDecodeError as e:
            check(False, f"--dump-after {s}: stdout is not one JSON document ({e})")
            continue
        check(dumps[s].get("stage", "schedule") == s, f"--dump-after {s}: says it is stage {dumps[s].get('stage')}")
    if len(dumps) == len(stages):
        check(dumps["liveness"]["liveness_peak_bytes"] == totals["liveness_peak_bytes"],
              "the liveness dump's peak is inspect's")
        check(dumps["lower-bound"]["bytes"] == totals["lower_bound_bytes"], "the lower-bound dump's bound is inspect's")
        check(len(dumps["graph"]["layers"]) > 0 and len(dumps["graph"]["tasks"]) > 0, "the graph dump has layers and tasks")
        check(json.loads(plain_plan)["summary"] == dumps["schedule"]["summary"],
              "the schedule dump is the plan compiled without the flag")
    r = run(*base, "--dump-after", "liveness", "-o", plan)
    check(r.returncode == 0 and r.stdout.strip() and json.loads(r.stdout) == dumps.get("liveness"),
          f"--dump-after liveness -o: the same dump (exit {r.returncode}: {r.stderr.strip()})")
    check(os.path.exists(plan) and open(plan).read() == plain_plan,
          "--dump-after liveness -o: the plan written is the one compiled without the flag")
    r = run(*base, "--dump-after", "bogus")
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and
          f"unknown stage \"bogus\" ({', '.join(stages)})" in r.stderr,
          f"an unknown stage: one line naming the stages, exit 2 (got exit {r.returncode}: {r.stderr.strip()})")
    # moDNN's Eq. 3 where its iteration cycles: chain3 (batch 4, every size) with the fastest
    # forward convolution's workspace at 4 samples made 20000 B. In 8000 B (4928 B beside the
    # weights) 4 samples need 21760 B, so Eq. 3 gives 4 x 4928 / 21760 = 0.91, down to 1; 1 sample
    # needs 1024 B, so 4.8, back to 4. The smallest size on the cycle is the answer, 1 (after 32
    # turns it used to stop on 4).
    chain3 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "chain3.json")
    osc = os.path.join(tmp, "osc.json")
    r = run("profile", chain3, "--batch", "4", "--device", "model:k40", "--sizes", "all", "-o", osc)
    check(r.returncode == 0, f"profile chain3: {r.stderr.strip()}")
    prof = json.load(open(osc))
    edited = 0
    for sig in prof["signatures"]:
        for c in sig["costs"]:
            if sig["type"] == "conv" and c["op"] == "forward" and c["algo"] == "winograd" and c["batch"] == 4:
                c["workspace_bytes"] = 20000
                edited += 1
    json.dump(prof, open(osc, "w"))
    r = run("compile", chain3, "--profile", osc, "--budget", "8000B", "--dump-after", "sub-batch")
    eq3 = json.loads(r.stdout).get("modnn_eq3") if r.returncode == 0 else None
    check(edited == 1 and eq3 == 1, f"Eq. 3 on a cycle 4 -> 1 -> 4: the smallest size, 1; got {eq3} ({r.stderr.strip()})")
finish(f"{len(stages)} stages dumped; ")
