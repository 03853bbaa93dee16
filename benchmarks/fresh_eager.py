"""Eager PyTorch alone, timed by blocks in a process that never imports ONNX Runtime or TVM (issue 29).

    python benchmarks/fresh_eager.py models.NAME INPUTS.pkl ROOT [ROUNDS]

``benchmarks/bench.py`` runs this for its *eager, fresh process* column: the zoo model ``NAME``
(from ``ROOT``) on the pickled numpy argument tuples, by ``dycl.harness.timing.blocks`` (the
method of bench's own eager column, the same code). Importing the ``dycl`` package would import
ONNX Runtime (``dycl.api``), so the two modules the method needs, ``dycl/progress.py`` and
``dycl/harness/timing.py`` (standard library and torch only), are loaded from their files under
an empty ``dycl`` package. Prints one JSON line: the median ms (``median_ms``, each input's best
over ``ROUNDS`` rounds, default 3) and each round's own median (``rounds_ms``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pickle
import sys
import types
from pathlib import Path

import torch


def _module(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def timing_module(root: Path) -> types.ModuleType:
    """``dycl.harness.timing`` without the ``dycl`` package's ``__init__`` (and so without ONNX Runtime)."""
    for package in ("dycl", "dycl.harness"):
        stub = types.ModuleType(package)
        stub.__path__ = []  # a package with nothing found in it: only the modules loaded below
        sys.modules[package] = stub
    _module("dycl.progress", root / "dycl" / "progress.py")
    return _module("dycl.harness.timing", root / "dycl" / "harness" / "timing.py")


def main() -> None:
    zoo, data, root = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    timing = timing_module(root)
    sys.path.append(str(root))  # the zoo (models/), after the installed packages
    model, _ = importlib.import_module(zoo).build()  # as bench.py builds it
    inputs = [tuple(torch.from_numpy(a) for a in args) for args in pickle.loads(data.read_bytes())]
    neighbours = [name for name in ("onnxruntime", "tvm") if name in sys.modules]
    assert not neighbours, f"a fresh process must not load {neighbours}"
    eager = timing.blocks({"eager": model}, inputs, rounds=rounds)["eager"]
    print(json.dumps({"median_ms": eager.median_ms, "rounds_ms": list(eager.rounds_ms)}))


if __name__ == "__main__":
    main()
