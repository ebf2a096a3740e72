#!/usr/bin/env python3
"""Checks the include graph against the module dependencies written down in ARCHITECTURE.md.

  python3 scripts/check_deps.py            exit 1 (naming file and line) on an include the document does not allow
  python3 scripts/check_deps.py --graph    print the include graph between modules, as found

A module is a folder of C++/CUDA sources (planner/model, planner/passes, executor/cuda, ...). The
document's fenced block marked `deps` lists, one line per module, `MODULE: DEP DEP ...`; a module may
include its own headers and those of the modules it lists. The listed graph must have no cycle.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIRS = ["planner", "executor", "profiler", "tests", "benchmarks"]
EXTS = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')


def module_of(rel):
    """A folder is a module; a folder's main.cpp is a program on top of it, MODULE:program."""
    d = os.path.dirname(rel) or "."
    return d + ":program" if os.path.basename(rel) == "main.cpp" else d


def includes():
    """(module, file, line number, included module) for every quoted include."""
    for top in SOURCE_DIRS:
        for root, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith(EXTS):
                    continue
                path = os.path.join(root, f)
                rel = os.path.relpath(path, ROOT)
                with open(path, errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        local = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
                        target = local if os.path.exists(os.path.join(ROOT, local)) else inc
                        if not os.path.exists(os.path.join(ROOT, target)):
                            continue  # a generated or third-party header
                        yield module_of(rel), rel, n, os.path.dirname(target) or "."


def allowed_graph():
    text = open(os.path.join(ROOT, "ARCHITECTURE.md")).read()
    m = re.search(r"```deps\n(.*?)```", text, re.S)
    if not m:
        sys.exit("ARCHITECTURE.md: no ```deps block with the allowed module dependencies")
    graph = {}
    for n, line in enumerate(m.group(1).splitlines(), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        m = re.match(r"^(\S+):(?:\s+(.*))?$", line)
        if not m:
            sys.exit(f"ARCHITECTURE.md: deps line {n}: expected 'MODULE: DEP DEP ...', got '{line}'")
        graph[m.group(1)] = set((m.group(2) or "").split())
    return graph


def find_cycle(graph):
    state = {}

    def visit(v, path):
        state[v] = 1
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path + [v, w]
            if w not in state:
                c = visit(w, path + [v])
                if c:
                    return c
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state:
            c = visit(v, [])
            if c:
                return c
    return None


def main():
    found = {}
    for mod, _, _, dep in includes():
        if dep != mod:
            found.setdefault(mod, set()).add(dep)
    if "--graph" in sys.argv:
        for mod in sorted(found):
            print(f"{mod}: {' '.join(sorted(found[mod]))}")
        return 0
    graph = allowed_graph()
    errors = []
    cycle = find_cycle(graph)
    if cycle:
        errors.append("ARCHITECTURE.md: the allowed dependencies have a cycle: " + " -> ".join(cycle))
    for mod, rel, n, dep in includes():
        if dep == mod:
            continue
        if mod not in graph:
            errors.append(f"{rel}:{n}: module {mod} is not in ARCHITECTURE.md's deps block")
        elif dep not in graph[mod]:
            errors.append(f"{rel}:{n}: {mod} includes {dep}, which ARCHITECTURE.md does not allow "
                          f"(allowed: {' '.join(sorted(graph[mod])) or 'nothing'})")
    unused = [f"{m} -> {d}" for m in sorted(graph) for d in sorted(graph[m]) if d not in found.get(m, set())]
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"check_deps: {sum(len(v) for v in found.values())} module dependencies, all allowed by ARCHITECTURE.md"
          + (f"; allowed but unused: {', '.join(unused)}" if unused else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
