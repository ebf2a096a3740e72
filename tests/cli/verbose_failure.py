#!/usr/bin/env python3
"""`ucplan compile -v` that finds no plan says why, table by table: every candidate the search
simulated, with the reason it failed, on stderr before the one-line error; without -v the error
is the only line, and says that -v lists them. Either way the exit code is 2 and no plan file is
written.
Usage: verbose_failure.py UCPLAN_BIN PROFILE NETWORK"""
import os
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan, profile, network = sys.argv[1:4]

with tempfile.TemporaryDirectory() as tmp:
    plan_path = os.path.join(tmp, "plan.json")
    # ResNet-20 b64 without offload at 15 MiB: above the smallest memory a plan may need, below
    # what any residency table the search tries fits in.
    base = [ucplan, "compile", network, "--profile", profile, "--budget", "15MiB", "--offload", "never",
            "-o", plan_path]
    for verbose in (False, True):
        r = subprocess.run(base + (["-v"] if verbose else []), capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2, f"-v={verbose}: exit code {r.returncode}, not 2")
        check(not os.path.exists(plan_path), f"-v={verbose}: a plan file was written")
        check(bool(lines) and lines[-1].startswith("ucplan: error: --budget: strategy ucplan finds no plan"),
              f"-v={verbose}: last line {lines[-1:]!r}")
        searched = [l for l in lines[:-1] if l.lstrip().startswith("search ")]
        if not verbose:
            check(len(lines) == 1, f"without -v the error is the only line, got {len(lines)}")
            check(lines[-1].endswith("; -v lists every candidate tried and why it failed"),
                  "without -v the error says what -v adds")
            continue
        check(len(searched) >= 10, f"-v: {len(searched)} search lines")
        check(len(searched) == len(lines) - 1, "-v: every line before the error is a search line")
        check(all(" no: " in l for l in searched), "-v: every candidate says why it failed")
        branches = {l.split("sub-batch 64: ", 1)[1].split(":", 1)[0] for l in searched if "sub-batch 64: " in l}
        check({"no offload", "no offload, two-ended placement", "no offload, placed after scheduling (1/64 slack)",
               "no offload, placed after scheduling (1/32 slack)"} <= branches,
              f"-v: every branch without offload is listed, got {sorted(branches)}")
finish("verbose_failure: ")
