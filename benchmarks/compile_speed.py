#!/usr/bin/env python3
"""Compile time of two builds side by side, and whether they make the same plans.

  python3 benchmarks/compile_speed.py OLD_BUILD NEW_BUILD [--repeats N] [--quick] [--labels OLD,NEW]

For a change meant to make compiling faster without changing any plan: every case below is compiled
by both builds' `ucplan compile`, alternating (old, new, old, new, ...) so that both see the same load
on the machine, N times each (default 3). Reports the median wall-clock time of each build (MEASURED),
the ratio new / old of the medians, and whether the two plans are byte-identical (`cmp` of the files;
every repeat of one build must also give the same bytes, or the case is marked not deterministic).
A plan that differs is reported as such and the script exits 1: the change is then not a pure speed-up.

Cases: the default strategy on the measured H100 profiles in the repository (ResNet-20 b64 calibrated
at 85 and 50 % of its liveness peak, ResNet-50 b64 at 50 %: the slowest compile of the last sessions),
and on model:h100 profiles ResNet-50 b64 at 50 %, VGG-16 b32 at 50 % and ResNet-152 b256 at 12 GiB
(the issue's 1 s target), and the 10,455-layer ResNet (networks/generate.py deep-resnet) b16 on model:k40
at 12 GiB (its 30 s target). --quick: the ResNet-20 and ResNet-152 cases only.
Writes benchmarks/results/compile_speed.md and regenerates benchmarks/RESULTS.md.
"""
import argparse
import filecmp
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Cli, deep_resnet, git_head, machine_note, median, rel, table, work_dir, write_section  # noqa: E402

MEASURED_R20 = "profiles/h100/calibrated/resnet20-b64.json"
MEASURED_R50 = "benchmarks/results/gpu-h100/plan-quality/profile-resnet50-b64.json"
DEEP = "deep-resnet"  # _common.deep_resnet, made into the work folder
# (name, network, profile: a repository file or (network, batch, model device), budget, in --quick)
CASES = [
    ("resnet20 b64, measured H100 (calibrated), 85 %", "resnet20", MEASURED_R20, "85%", True),
    ("resnet20 b64, measured H100 (calibrated), 50 %", "resnet20", MEASURED_R20, "50%", True),
    ("resnet50 b64, measured H100, 50 %", "resnet50", MEASURED_R50, "50%", False),
    ("resnet50 b64, model:h100, 50 %", "resnet50", ("resnet50", 64, "h100"), "50%", False),
    ("vgg16 b32, model:h100, 50 %", "vgg16", ("vgg16", 32, "h100"), "50%", False),
    ("resnet152 b256, model:h100, 12 GiB", "resnet152", ("resnet152", 256, "h100"), "12GiB", True),
    ("10,455-layer ResNet b16, model:k40, 12 GiB", DEEP, (DEEP, 16, "k40"), "12GiB", False),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old", help="build folder of the reference (bin/ucplan)")
    ap.add_argument("new", help="build folder of the change")
    ap.add_argument("--repeats", type=int, default=3, help="compiles per case and build (default 3)")
    ap.add_argument("--quick", action="store_true", help="the resnet20 and resnet152 cases only")
    ap.add_argument("--labels", help="what the two builds are, for the report, e.g. their commits: OLD,NEW")
    args = ap.parse_args()
    if args.repeats < 1:
        sys.exit("error: --repeats must be at least 1")
    old, new = Cli(args.old), Cli(args.new)
    if old.ucplan == new.ucplan:
        sys.exit("error: OLD_BUILD and NEW_BUILD are the same program")
    labels = (args.labels or f"{rel(old.ucplan)},{rel(new.ucplan)}").split(",")
    if len(labels) != 2:
        sys.exit(f"error: --labels {args.labels}: two names, OLD,NEW, separated by a comma")
    w = work_dir(args.new, "compile_speed")
    rows, differ = [], []
    for k, (name, net, prof, budget, quick) in enumerate(CASES):
        if args.quick and not quick:
            continue
        if net == DEEP:
            net, _ = deep_resnet(old, w)
        if isinstance(prof, tuple):  # a model profile, made by the old build (both read the same file)
            pname, batch, dev = prof
            prof = os.path.join(w, f"{pname}-b{batch}-{dev}.profile.json")
            if not os.path.exists(prof):
                old.run(["ucplan", "profile", net, "--batch", str(batch), "--device", f"model:{dev}", "-o", prof])
        times = {"old": [], "new": []}
        plans = {"old": [], "new": []}
        for r in range(args.repeats):
            for tag, cli in (("old", old), ("new", new)):
                plan = os.path.join(w, f"case{k}-{tag}-{r}.plan.json")
                _, _, _, dt = cli.run(["ucplan", "compile", net, "--profile", prof, "--budget", budget, "-q", "-o",
                                       plan], timed=True)
                times[tag].append(dt)
                plans[tag].append(plan)
        deterministic = all(filecmp.cmp(plans[t][0], p, shallow=False) for t in plans for p in plans[t][1:])
        same = filecmp.cmp(plans["old"][0], plans["new"][0], shallow=False)
        if not same or not deterministic:
            differ.append(name)
        mo, mn = median(times["old"]), median(times["new"])
        rows.append([name, f"{mo:.2f}", f"{mn:.2f}", f"{mn / mo:.2f}",
                     ("identical" if same else "**differ**") + ("" if deterministic else ", **not deterministic**")])
    text = "\n".join([
        "## compile_speed.py: compile time of two builds side by side",
        "",
        f"`python3 benchmarks/compile_speed.py {rel(args.old)} {rel(args.new)} --repeats {args.repeats}"
        f"{' --quick' if args.quick else ''}{f' --labels {args.labels}' if args.labels else ''}`: wall-clock seconds "
        f"of `ucplan compile` (default strategy, two threads), MEASURED, median of {args.repeats} per build, the "
        f"builds alternating on every repeat. Old: {labels[0]}; new: {labels[1]}. Plans: `cmp` of the two builds' "
        "plan files.",
        "",
        table(["case", "old (s)", "new (s)", "new / old", "plans"], rows, "lrrrl"),
        "",
        f"Machine: {machine_note(new)}. The source tree's commit ({git_head()}) is that of the working tree the "
        "script ran from, which need not be either build's.",
    ])
    write_section("compile_speed.md", text)
    print(text)
    if differ:
        print(f"error: plans differ or are not deterministic for: {'; '.join(differ)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
