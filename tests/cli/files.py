#!/usr/bin/env python3
"""What the commands do with the files they are given: nothing an input is lost to an output, no output
lost to another, devices and links written as such, a bad output refused before any work, and an invalid
plan explained without its views. Each refusal is one line, exit code 2, and leaves every file as it was.
Usage: files.py UCPLAN_BIN"""
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan = sys.argv[1]
NET = "deepbench/conv09"  # one convolution: each compile is quick, also under the sanitizers


def run(*args, cwd=None):
    return subprocess.run([ucplan, *args], capture_output=True, text=True, cwd=cwd)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def refused(r, want, what):
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    check(r.returncode == 2 and len(lines) == 1 and want in lines[0],
          f"{what}: exit 2 and one line with {want!r}; got {r.returncode}: {r.stderr.strip()!r}")


with tempfile.TemporaryDirectory() as tmp:
    j = lambda *p: os.path.join(tmp, *p)  # noqa: E731
    prof, plan = j("p.json"), j("plan.json")
    # Made in the folder, so that the plan names its profile as "p.json" (check --recompile below).
    r = run("profile", NET, "--batch", "4", "--device", "model:k40", "-o", "p.json", cwd=tmp)
    check(r.returncode == 0, f"profile: {r.stderr.strip()}")
    r = run("compile", NET, "--profile", "p.json", "--budget", "50%", "-q", "-o", "plan.json", cwd=tmp)
    check(r.returncode == 0, f"compile: {r.stderr.strip()}")
    before = {f: digest(f) for f in (prof, plan)}

    # An output that is an input: refused, the input untouched.
    refused(run("compile", NET, "--profile", prof, "--budget", "50%", "-q", "-o", prof),
            "-o: is also the profile (--profile)", "compile -o PROFILE")
    refused(run("explain", plan, "--trace", plan), "--trace: is also the plan", "explain --trace PLAN")
    refused(run("run", plan, "--trace", plan), "--trace: is also the plan", "run --trace PLAN")
    refused(run("frontier", NET, "--profile", prof, "--points", "2", "--svg", prof),
            "--svg: is also the profile (--profile)", "frontier --svg PROFILE")
    shutil.copy(prof, j("t1.json"))
    refused(run("calibrate", prof, "-t", j("t1.json"), "-t", j("t1.json"), "-o", j("c.json")),
            "--trace: is given twice", "calibrate with one trace twice")
    refused(run("calibrate", prof, "-t", j("t1.json"), "-o", j("t1.json")), "-o: is also a trace (--trace)",
            "calibrate -o TRACE")
    # The same file for two outputs: refused before the work, nothing written.
    refused(run("compile", NET, "--profile", prof, "--budget", "50%", "-o", j("same.json"), "--trace",
                j("same.json")), "--trace: is also where -o writes", "compile -o F --trace F")
    check(not os.path.exists(j("same.json")), "no file left by the refused compile")
    # A bad output costs no work: refused before profiling, running or compiling the frontier.
    for args, what in ((("profile", NET, "--batch", "4", "--device", "cpu", "-o", j("no", "p.json")), "profile"),
                       (("run", plan, "--trace", j("no", "t.json")), "run"),
                       (("frontier", NET, "--profile", prof, "--svg", j("no", "f.svg")), "frontier")):
        refused(run(*args), "does not exist", f"{what} into a missing folder")
    check(before == {f: digest(f) for f in (prof, plan)}, "the inputs are as they were")

    # A symbolic link: the file it names is written, the link stays a link.
    os.makedirs(j("real"))
    os.symlink(os.path.join("real", "plan.json"), j("link.json"))
    r = run("compile", NET, "--profile", "p.json", "--budget", "50%", "-q", "-o", "link.json", cwd=tmp)
    with open(plan) as f, open(j("real", "plan.json")) as g:
        here, there = json.load(f), json.load(g)
    # The plan names its profile from the folder it lands in, so that check --recompile finds it.
    said = there["inputs"]["profile"]
    there["inputs"]["profile"] = "p.json"
    check(r.returncode == 0 and os.path.islink(j("link.json")) and said == "../p.json" and here == there,
          f"-o LINK writes the file it names and keeps the link: {r.returncode} {r.stderr.strip()!r} {said!r}")
    # However the profile's path is typed, from wherever: the same plan, byte for byte.
    os.makedirs(j("sub"))
    os.symlink("p.json", j("p-link.json"))
    typed = ((("--profile", "./p.json", "-o", "same.json"), tmp, "./p.json"),
             (("--profile", prof, "-o", "same.json"), tmp, "an absolute path"),
             (("--profile", "p-link.json", "-o", "same.json"), tmp, "a link to it"),
             (("--profile", "../p.json", "-o", "../same.json"), j("sub"), "../p.json from a folder below"))
    for args, cwd, what in typed:
        r = run("compile", NET, *args, "--budget", "50%", "-q", cwd=cwd)
        check(r.returncode == 0 and digest(j("same.json")) == before[plan],
              f"the profile as {what}: the same plan, byte for byte: {r.returncode} {r.stderr.strip()!r}")
    os.remove(j("same.json"))
    # A device is written to, not replaced (a pipe likewise): /dev/null takes a plan and a trace.
    r = run("compile", NET, "--profile", prof, "--budget", "50%", "-q", "-o", "/dev/null", "--trace",
            "/dev/null")
    check(r.returncode == 0 and not os.path.isfile("/dev/null"), f"-o /dev/null: {r.returncode} {r.stderr.strip()!r}")
    # /dev/stdout into a pipe: its links end in /proc/self/fd/1, which names no path ("pipe:[N]").
    r = run("compile", NET, "--profile", prof, "--budget", "50%", "-q", "-o", "/dev/stdout")
    check(r.returncode == 0 and json.loads(r.stdout)["format"].startswith("ucplan-plan"),
          f"-o /dev/stdout into a pipe: {r.returncode} {r.stderr.strip()!r}")

    # An invalid plan: explain says why (exit 1) and draws nothing, whatever the indices hold.
    with open(plan) as f:
        p = json.load(f)
    for b in p["buffers"]:
        if not b.get("resident"):
            b["last_step"] = 1000000
            break
    with open(j("bad.json"), "w") as f:
        json.dump(p, f)
    for extra, said in (((), "INVALID: "), (("--json",), '"valid": false'),
                        (("--trace", j("bad-trace.json"), "--svg", j("bad.svg")), "INVALID: ")):
        r = run("explain", j("bad.json"), *extra)
        check(r.returncode == 1 and said in r.stdout,
              f"explain of an invalid plan {extra}: exit 1 with the verifier's reason; got {r.returncode} "
              f"{r.stdout.strip()!r} {r.stderr.strip()!r}")
    check(not os.path.exists(j("bad-trace.json")) and not os.path.exists(j("bad.svg")),
          "no trace or SVG of an invalid plan")

    # check --recompile finds the profile beside the plan when run from elsewhere, and a plan whose
    # profile is nowhere fails alone.
    r = run("check", "--recompile", "plan.json", cwd=tmp)
    check(r.returncode == 0, f"check --recompile from the plan's folder: {r.stdout.strip()} {r.stderr.strip()}")
    os.makedirs(j("moved"))
    for f in ("p.json", "plan.json"):
        shutil.copy(j(f), j("moved", f))
    r = run("check", "--recompile", os.path.join("moved", "plan.json"), cwd=tmp)
    check(r.returncode == 0, f"check --recompile, the profile beside the plan: {r.stdout.strip()} {r.stderr.strip()}")
    # The plan indented by another tool is the same plan; a note added to it is not, and the
    # difference shown is the note, not the indentation.
    plan_json = json.load(open(j("plan.json")))
    json.dump(plan_json, open(j("moved", "pretty.json"), "w"), indent=2)
    r = run("check", "--recompile", os.path.join("moved", "pretty.json"), cwd=tmp)
    check(r.returncode == 0 and "reproduced (the same content, formatted otherwise" in r.stdout,
          f"check --recompile of the plan reformatted: {r.returncode} {r.stdout.strip()} {r.stderr.strip()}")
    plan_json["notes"].append("edited")
    json.dump(plan_json, open(j("moved", "edited.json"), "w"), indent=2)
    r = run("check", "--recompile", os.path.join("moved", "edited.json"), cwd=tmp)
    check(r.returncode == 1 and "' \"notes\": [" in r.stdout,
          f"check --recompile of the plan reformatted and edited names the notes: {r.returncode} {r.stdout.strip()}")
    # Another p.json in the current folder is passed over for the one beside the plan.
    os.makedirs(j("other"))
    r = run("profile", NET, "--batch", "2", "--device", "model:k40", "-o", j("other", "p.json"))
    r = run("check", "--recompile", os.path.join("..", "moved", "plan.json"), cwd=j("other"))
    check(r.returncode == 0, f"check --recompile, another p.json where it runs: {r.stdout.strip()} {r.stderr.strip()}")
    os.remove(j("moved", "p.json"))
    os.remove(j("p.json"))
    r = run("check", "--recompile", os.path.join("moved", "plan.json"), "plan.json", cwd=tmp)
    check(r.returncode == 1 and r.stdout.count("inputs.profile: p.json is not there from the plan's folder") == 2,
          f"check --recompile without the profile: each plan fails alone: {r.returncode} {r.stdout.strip()!r}")

    # A device output that fails leaves the files beside it unwritten: they are renamed into place
    # only once every output is written (the plan was written, then the trace to /dev/full failed).
    r = run("profile", NET, "--batch", "4", "--device", "model:k40", "-o", j("p2.json"))
    check(r.returncode == 0, f"profile: {r.stderr.strip()}")
    if os.path.exists("/dev/full"):
        r = run("compile", NET, "--profile", j("p2.json"), "--budget", "50%", "-q", "-o", j("full.json"),
                "--trace", "/dev/full")
        refused(r, "/dev/full: writing failed", "compile -o FILE --trace /dev/full")
        check(not os.path.exists(j("full.json")), "no plan written when the trace beside it failed")
        # Standard output that cannot be written is an error, not a report lost with exit 0.
        with open("/dev/full", "w") as full:
            r = subprocess.run([ucplan, "explain", plan, "--json"], stdout=full, stderr=subprocess.PIPE, text=True)
        refused(r, "standard output: writing failed", "explain --json > /dev/full")
    # A replaced file keeps its mode, and no temporary is left beside it.
    os.chmod(plan, 0o600)
    r = run("compile", NET, "--profile", j("p2.json"), "--budget", "50%", "-q", "-o", plan)
    check(r.returncode == 0 and os.stat(plan).st_mode & 0o777 == 0o600,
          f"a plan written over one of mode 600 keeps it: {oct(os.stat(plan).st_mode)} {r.stderr.strip()!r}")
    check(not [f for f in os.listdir(tmp) if f.startswith(".")], f"temporaries left: {os.listdir(tmp)}")
    # An option given an empty value is refused, not read as not given.
    refused(run("explain", plan, "--svg", ""), "--svg: an empty value", "explain --svg ''")
    # A count says so the same way, not that "" is not a whole number.
    refused(run("compile", NET, "--profile", prof, "--budget", "50%", "--batch", "", "-o", j("e.json")),
            "--batch: an empty value", "compile --batch ''")
    # check goes on past a file it cannot read, and says so in its exit code (2: bad input).
    with open(j("broken.json"), "w") as f:
        f.write("{")
    r = run("check", j("broken.json"), plan)
    check(r.returncode == 2 and "broken.json: line 1 column 2: invalid JSON" in r.stderr and r.stdout.count("ok   ") == 1 and
          "1 of 2 plans valid (1 not read)" in r.stdout,
          f"check of an unreadable plan and a good one: {r.returncode} {r.stdout.strip()!r} {r.stderr.strip()!r}")
    # inspect --csv-steps quotes a layer name as RFC 4180 does: one row of six fields per step.
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "chain3.json")) as f:
        net = json.load(f)
    odd = 'co,n"v'
    for layer in net["layers"]:
        if layer.get("name") == "conv":
            layer["name"] = odd
        layer["inputs"] = [odd if x == "conv" else x for x in layer.get("inputs", [])]
    with open(j("odd.json"), "w") as f:
        json.dump(net, f)
    r = run("inspect", j("odd.json"), "--batch", "2", "--csv-steps", j("odd.csv"))
    with open(j("odd.csv"), newline="") as f:
        rows = list(csv.reader(f))
    check(r.returncode == 0 and {len(row) for row in rows} == {6} and rows[1][3] == odd,
          f"inspect --csv-steps of a layer named {odd!r}: {r.stderr.strip()!r} {rows[:2]}")
finish("files: ")
