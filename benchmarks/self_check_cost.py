"""What the self-check at the end of ``dycl.compile`` costs on the zoo (``dycl.harness.self_check``).

    OMP_NUM_THREADS=1 python benchmarks/self_check_cost.py [--models blockdrop,ranet] [--json OUT]

Each model is compiled once in this process (default options, ONNX Runtime); the table gives
the compile's wall-clock and CPU time (the whole ``dycl.compile`` call, check included), the
check's own (``compiled.stats["self_check"]``), how many inputs it compared, and the check's
share of the compile (CPU time; wall-clock on a shared machine mostly measures the others).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dycl  # noqa: E402
from dycl.zoo import resolve  # noqa: E402
from models import ZOO  # noqa: E402


def measure(name: str) -> dict:
    spec = resolve(name)
    wall, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = dycl.compile(spec.model, spec.example)
    total_wall, total_cpu = time.perf_counter() - wall, time.process_time() - cpu
    check = compiled.stats["self_check"]
    return {"model": name.removeprefix("models."), "compile_s": round(total_wall, 3),
            "compile_cpu_s": round(total_cpu, 3), "check_s": check["seconds"], "check_cpu_s": check["cpu_seconds"],
            "inputs": check["inputs"], "share_cpu": round(check["cpu_seconds"] / total_cpu, 4),
            "share_wall": round(check["seconds"] / total_wall, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated zoo names (default: the whole zoo)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    names = [f"models.{n}" for n in args.models.split(",")] if args.models else list(ZOO)
    rows = []
    print("| model | compile s (CPU s) | check s (CPU s) | inputs | check share (CPU) |")
    print("|---|---|---|---|---|")
    for name in names:
        row = measure(name)
        rows.append(row)
        print(f"| {row['model']} | {row['compile_s']:.2f} ({row['compile_cpu_s']:.2f}) | {row['check_s']:.3f} "
              f"({row['check_cpu_s']:.3f}) | {row['inputs']} | {100 * row['share_cpu']:.1f}% |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
