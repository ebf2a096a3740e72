#!/usr/bin/env python3
"""Under an address-space limit (`ulimit -v`, as on many clusters), every program ends: it runs,
or says in one line what does not fit and exits with 2. OpenBLAS, which every program loads (CBC
links it), starts a worker per core that takes a 128 MiB buffer at once and retries forever where
it cannot (OpenBLAS 0.3.21, its issue 5289): compile, profile and run all hung, at exit or in their
first product. Each command runs at limits from 300 MiB to 1.6 GiB in steps of 100 MiB, under a
60 s timeout; below some limit a program cannot even load its libraries (the dynamic loader's
error, exit 127), which is allowed; a timeout or any other exit is not. The largest limit must
run each command.
Usage: address_space.py UCPLAN_BIN"""
import json
import os
import resource
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan = sys.argv[1]
NET = {"format": "ucplan-network/1", "name": "tiny", "input": {"shape": [3, 16, 16]}, "labels": 4,
       "layers": [{"name": "c1", "type": "conv", "inputs": ["data"], "out_channels": 8, "kernel": 3, "pad": 1},
                  {"name": "r1", "type": "relu", "inputs": ["c1"]},
                  {"name": "f", "type": "fc", "inputs": ["r1"], "out_features": 4},
                  {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]}


def limited(mib):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
    return apply


with tempfile.TemporaryDirectory() as tmp:
    j = lambda name: os.path.join(tmp, name)  # noqa: E731
    with open(j("net.json"), "w") as f:
        json.dump(NET, f)
    setup = [["profile", j("net.json"), "--batch", "4", "--device", "model:k40", "-o", j("model.json")],
             ["profile", j("net.json"), "--batch", "4", "--device", "cpu", "-o", j("cpu.json")],
             ["compile", j("net.json"), "--profile", j("cpu.json"), "--budget", "90%", "-q", "-o", j("plan.json")]]
    for args in setup:
        r = subprocess.run([ucplan] + args, capture_output=True, text=True)
        check(r.returncode == 0, f"{args[0]} without a limit: exit {r.returncode}: {r.stderr.strip()}")
    commands = {
        "compile": ["compile", j("net.json"), "--profile", j("model.json"), "--budget", "90%", "-q", "-o",
                    j("out.json")],
        "profile --device cpu": ["profile", j("net.json"), "--batch", "4", "--device", "cpu", "-o", j("out.json")],
        "run --check": ["run", j("plan.json"), "--check", "-n", "1"],
    }
    limits = list(range(300, 1700, 100))
    for name, args in commands.items():
        outcomes = []
        for mib in limits:
            try:
                r = subprocess.run([ucplan] + args, capture_output=True, text=True, timeout=60,
                                   preexec_fn=limited(mib))
            except subprocess.TimeoutExpired:
                check(False, f"{name} under ulimit -v {mib} MiB: still running after 60 s (a hang)")
                outcomes.append("hang")
                continue
            errors = [line for line in r.stderr.splitlines() if ": error" in line]
            if r.returncode == 127:
                check("error while loading shared libraries" in r.stderr,
                      f"{name} under {mib} MiB: exit 127 without the loader's message: {r.stderr.strip()}")
            elif r.returncode == 2:
                check(len(errors) == 1, f"{name} under {mib} MiB: exit 2 without one error line: {r.stderr.strip()}")
            else:
                check(r.returncode == 0, f"{name} under {mib} MiB: exit {r.returncode}: {r.stderr.strip()}")
            outcomes.append(str(r.returncode))
        check(outcomes[-1] == "0", f"{name} under {limits[-1]} MiB does not run: {outcomes}")
        print(f"{name}: exit codes at {limits[0]}..{limits[-1]} MiB: {' '.join(outcomes)}")

finish("address_space: ")
