#!/usr/bin/env python3
"""Plans do not depend on the machine's cores (DESIGN.md "Determinism"): the search runs its branches
on as many threads as the process has cores (planner/passes/parallel.h), and a plan compiled on one
core, on this machine's and on sixteen must be the same bytes, or a plan made on a workstation would
fail `check --recompile` on a laptop. Sixteen cores come from a preloaded library that answers
sched_getaffinity (tests/cli/many_cores.cpp), so threads outnumber the cores here and interleave
more. Cases: resnet20 b64 at 50 % of its liveness peak (four branches, the pool branches and the
third search), vgg16 b32 at 50 % on the V100 model (it offloads, recomputes and splits the batch), and a
frontier, whose budgets also compile side by side.
Usage: cores.py UCPLAN_BIN MANY_CORES_LIBRARY"""
import os
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan, many_cores = sys.argv[1], sys.argv[2]
one_core = min(os.sched_getaffinity(0))

# (name, environment, preexec_fn, the cores a child process should see): one core, this process's
# cores and sixteen.
machine = len(os.sched_getaffinity(0))
environments = [("1 core", None, lambda: os.sched_setaffinity(0, {one_core}), 1),
                (f"{machine} cores", None, None, machine),
                ("16 cores", dict(os.environ, LD_PRELOAD=many_cores), None, 16)]

for name, env, preexec, expected in environments:  # usable_cores' count, as a child process sees it
    r = subprocess.run([sys.executable, "-c", "import os; print(len(os.sched_getaffinity(0)))"], env=env,
                       preexec_fn=preexec, capture_output=True, text=True)
    seen = int(r.stdout) if r.returncode == 0 else -1
    check(seen == expected, f"a child process with {name} sees {seen} cores")

with tempfile.TemporaryDirectory() as tmp:
    profiles = {}
    for net, batch, device in (("resnet20", 64, "h100"), ("vgg16", 32, "v100")):
        profiles[net] = os.path.join(tmp, f"{net}.json")
        subprocess.run([ucplan, "profile", net, "--batch", str(batch), "--device", f"model:{device}", "-o",
                        profiles[net]], check=True, capture_output=True)
    cases = [("resnet20 at 50 %", ["compile", "resnet20", "--profile", profiles["resnet20"], "--budget", "50%", "-q"]),
             ("vgg16 at 50 %", ["compile", "vgg16", "--profile", profiles["vgg16"], "--budget", "50%", "-q"]),
             ("resnet20's frontier", ["frontier", "resnet20", "--profile", profiles["resnet20"], "--points", "4",
                                      "--solver", "fast", "--json"])]
    for c, (what, args) in enumerate(cases):
        outputs = []
        for i, (name, env, preexec, _) in enumerate(environments):
            out = os.path.join(tmp, f"case{c}-{i}.json")
            command = [ucplan] + args + (["-o", out] if args[0] == "compile" else [])
            r = subprocess.run(command, env=env, preexec_fn=preexec, capture_output=True)
            check(r.returncode == 0, f"{what} on {name}: exit {r.returncode}: {r.stderr.decode()[-300:]}")
            if args[0] != "compile":
                outputs.append((name, r.stdout))
            elif r.returncode == 0:
                with open(out, "rb") as f:
                    outputs.append((name, f.read()))
            else:
                outputs.append((name, b""))
        for name, data in outputs[1:]:
            check(len(data) > 0 and data == outputs[0][1],
                  f"{what}: {name} gives other bytes than {outputs[0][0]} ({len(data)} against {len(outputs[0][1])})")
        same = all(data == outputs[0][1] for _, data in outputs)
        print(f"{what}: {len(outputs[0][1])} bytes, " + ("the same" if same else "not the same") + " on " +
              ", ".join(n for n, _ in outputs))

finish("plans on 1, this machine's and 16 cores: ")
