#!/usr/bin/env python3
"""scripts/export_torch.py's command line, checked without PyTorch (CI has none): every bad
argument is one line on stderr and exit code 2, before torch is imported.
Usage: export_torch_args.py UCPLAN_BIN"""
import os
import subprocess
import sys

script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "export_torch.py")
ucplan = sys.argv[1]
cases = [
    (["resnet18", "--input", "3x224", "-o", "n.json"], 'export_torch.py: error: --input: expected CxHxW with positive sizes, e.g. 3x224x224, got "3x224"'),
    (["resnet18", "--input", "0x224x224", "-o", "n.json"], "--input: expected CxHxW with positive sizes"),
    (["resnet18", "-o", "n.json"], "export_torch.py: error: the following arguments are required: --input (see --help)"),
    (["resnet18", "--input", "3x224x224"], "the following arguments are required: -o/--output"),
    (["resnet-18;rm", "--input", "3x224x224", "-o", "n.json"], 'MODEL: expected a torchvision model name or MODULE:FACTORY, got "resnet-18;rm"'),
    (["resnet18", "--input", "3x224x224", "-o", "n.json", "--batch", "0"], "--batch: must be positive, got 0"),
    (["resnet18", "--input", "3x224x224", "-o", "n.json", "--ucplan", ucplan, "--opset", "x"], "argument --opset: invalid int value"),
]
failed = 0
for args, expected in cases:
    r = subprocess.run([sys.executable, script] + args, capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    if r.returncode != 2 or len(lines) != 1 or expected not in lines[0]:
        print(f"FAIL {args}: exit {r.returncode}, stderr {r.stderr!r}, expected {expected!r}")
        failed = 1
    else:
        print(f"ok   {' '.join(args)}: {lines[0]}")
r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
if r.returncode != 0 or "MODULE:FACTORY" not in r.stdout:
    print(f"FAIL --help: exit {r.returncode}")
    failed = 1
sys.exit(failed)
