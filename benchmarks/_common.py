"""Shared helpers for the benchmark scripts (Python 3 standard library only).

The scripts call the ucplan CLI (never the C++ code directly), keep their intermediate files in a
work folder under the build folder, and write one Markdown section each under
benchmarks/results/; RESULTS.md is those sections joined under a common header.
"""
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
RESULTS_DIR = os.path.join(BENCH_DIR, "results")
RESULTS_MD = os.path.join(BENCH_DIR, "RESULTS.md")
# Sections of RESULTS.md, in order: (file under results/, script that writes it).
SECTIONS = [("conv_configs.md", "conv_configs.py"), ("budget_sweep.md", "budget_sweep.py"),
            ("optimality.md", "optimality.py"), ("precision.md", "precision.py"),
            ("precision_zoo.md", "precision_zoo.py"), ("gpu-h100.md", "gpu_results.py"), ("gpu-h200.md", "gpu_h200.py"),
            ("compile_speed.md", "compile_speed.py")]

MiB = 1024 * 1024
GiB = 1024 * MiB


def rel(path):
    """A path as written in reports: relative to the repository when inside it."""
    p = os.path.abspath(path)
    if p == REPO or p.startswith(REPO + os.sep):
        return os.path.relpath(p, REPO)
    return p


class Cli:
    """Finds the programs in a build folder and runs them from the repository root."""

    def __init__(self, build, log=True):
        self.build = os.path.abspath(build)
        self.log = log
        self.ucplan = self.find("ucplan")

    def find(self, name):
        for sub in ("bin", "planner", "profiler", "executor", "benchmarks", "."):
            p = os.path.join(self.build, sub, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
        sys.exit(f"error: {name} not found in {rel(self.build)} (bin/, planner/, ...): build it first, e.g.\n"
                 f"  cmake -S . -B {rel(self.build)} -G Ninja -DUCPLAN_WITH_CUDA=OFF && "
                 f"ninja -C {rel(self.build)} -j2 ucplan ucplan-profile ucplan-run bench_conv_config")

    def show(self, args):
        """The command line as a reader would type it from the repository root."""
        return " ".join(shlex.quote(rel(a) if os.path.isabs(a) and os.path.exists(a) else a) for a in args)

    def run(self, args, check=True, timed=False):
        """Runs a command; returns (rc, stdout, stderr, seconds)."""
        if args and args[0] == "ucplan":
            args = [self.ucplan] + list(args[1:])
        if self.log:
            print("  $ " + self.show(args), file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        p = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if check and p.returncode != 0:
            sys.exit(f"error: command failed ({p.returncode}): {self.show(args)}\n{p.stderr.strip()}")
        return p.returncode, p.stdout, p.stderr, dt

    def json(self, args):
        return json.loads(self.run(args)[1])


def deep_resnet(cli, folder):
    """The compile-time targets' 10,455-layer ResNet, made by networks/generate.py into `folder`
    (anew: a file left by an older generator is not used); returns (path, number of layers)."""
    path = os.path.join(folder, "deep-resnet-6-32-1000-6.json")
    cli.run([sys.executable, os.path.join(REPO, "networks", "generate.py"), "deep-resnet", "--n1", "6", "--n2", "32",
             "--n3", "1000", "--n4", "6", "-o", path])
    with open(path) as f:
        return path, len(json.load(f)["layers"])


def median(xs):
    return statistics.median(xs)


def load_average():
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def git_head():
    """The commit of the source tree (read-only; the working tree may differ from it)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def machine_note(cli):
    la = load_average()
    return (f"{os.cpu_count()} cores ({cpu_name()}), shared with other sessions: load average "
            f"{la[0]:.2f} / {la[1]:.2f} / {la[2]:.2f} (1 / 5 / 15 min) when this was written; "
            f"{cli.run(['ucplan', '--version'])[1].strip()} from {rel(cli.build)}, source tree at commit {git_head()}")


def fmt_ms(ns, digits=2):
    return f"{ns / 1e6:.{digits}f}"


def fmt_bytes(b):
    if b is None:
        return ""
    if b >= GiB:
        return f"{b / GiB:.2f} GiB"
    if b >= MiB:
        return f"{b / MiB:.1f} MiB"
    if b >= 1024:
        return f"{b / 1024:.1f} KiB"
    return f"{b} B"


def fmt_config(config):
    """[[algo, b], ...] run-length encoded: 'fft@32 x8' or 'winograd@64 + fft@32 x6'."""
    parts = []
    for algo, b in config:
        if parts and parts[-1][0] == (algo, b):
            parts[-1][1] += 1
        else:
            parts.append([(algo, b), 1])
    return " + ".join(f"{a}@{b}" + (f" x{n}" if n > 1 else "") for (a, b), n in parts)


def table(header, rows, align=None):
    """A Markdown table; align is a string of 'l'/'r' per column (default: first left, rest right)."""
    align = align or ("l" + "r" * (len(header) - 1))
    out = ["| " + " | ".join(header) + " |",
           "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def by_filter_table(res):
    """Speedups grouped by filter size (rows with "filter" and "sp"): layers, min, mean, max; most layers first."""
    groups = {}
    for r in res:
        groups.setdefault(r["filter"], []).append(r["sp"])
    rows = [[f, len(v), f"{min(v):.2f}x", f"{sum(v) / len(v):.2f}x", f"{max(v):.2f}x"]
            for f, v in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return table(["filter HxW", "layers", "min", "mean", "max"], rows)


def write_section(name, text):
    """Writes results/NAME and regenerates RESULTS.md from every section present."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, name)
    with open(path + ".tmp", "w") as f:
        f.write(text.rstrip() + "\n")
    os.replace(path + ".tmp", path)
    parts = [
        "# ucplan benchmark results\n",
        "Generated by the scripts in `benchmarks/` (see `benchmarks/README.md`); each section below is "
        "`benchmarks/results/<script>.md`, rewritten whenever its script runs. **MODELLED** numbers come from "
        "analytic `model:NAME` profiles (no GPU was used) and are deterministic: rerunning a script gives the same "
        "digits, except exact mode's under `--time-limit` (its plans and bounds are where CBC stood at the limit, "
        "which depends on the machine's speed and load). **MEASURED** numbers are wall-clock timings on the "
        "machine a section names (this one, 2 cores shared with other sessions, unless it names a GPU machine), "
        "or kernel timings in a measured profile; they are medians over the repeats a section states, single "
        "runs where it states none (optimality.py's compile seconds), and vary from run to run.\n",
    ]
    for fname, script in SECTIONS:
        p = os.path.join(RESULTS_DIR, fname)
        if os.path.exists(p):
            with open(p) as f:
                parts.append(f.read())
        else:
            parts.append(f"## {script}\n\nNot run yet: `python3 benchmarks/{script} BUILD`.\n")
    with open(RESULTS_MD + ".tmp", "w") as f:
        f.write("\n".join(parts))
    os.replace(RESULTS_MD + ".tmp", RESULTS_MD)
    print(f"wrote {rel(path)} and {rel(RESULTS_MD)}", file=sys.stderr)


def work_dir(build, sub):
    d = os.path.join(os.path.abspath(build), "bench-work", sub)
    os.makedirs(d, exist_ok=True)
    return d
