"""Call a saved artifact's host from many threads at once, in a torch-free process."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from dycl.harness.testing_host import to_numpy

_SCRIPT = r'''
import importlib.util, json, pickle, sys, threading
sys.modules["torch"] = None   # any import of torch or dycl now fails
sys.modules["dycl"] = None
import numpy as np

artifact, data, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location("host", artifact + "/host.py")
host = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host)
model = host.load(artifact, **options)
inputs, eager, atol, threads, calls = pickle.load(open(data, "rb"))

def flat(value):
    return [np.asarray(v) for _, v in host.flat_outputs(value)]

def same(a, b):
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)
                                    for x, y in zip(a, b))

single = [flat(model(*args)) for args in inputs]
near_eager = all(len(s) == len(e) and all(np.allclose(x, y, atol=atol, rtol=0) for x, y in zip(s, e))
                 for s, e in zip(single, eager))
wrong = []
def worker(k):
    for i in range(calls):
        j = (i * 7 + k * 13) % len(inputs)
        try:
            if not same(flat(model(*inputs[j])), single[j]):
                wrong.append((k, i, j))
        except Exception as error:
            wrong.append((k, i, repr(error)))
pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
for thread in pool:
    thread.start()
for thread in pool:
    thread.join()
print(json.dumps({"calls": threads * calls, "wrong": len(wrong), "first": [str(w) for w in wrong[:3]],
                  "near_eager": near_eager}))
'''


def hammer_host(artifact: Path, model: torch.nn.Module, inputs: list[Any], atol: float, threads: int = 8,
                calls: int = 300, env: dict[str, str] | None = None, options: dict[str, Any] | None = None) -> dict:
    """Run the host of ``artifact`` from ``threads`` threads, ``calls`` calls each, and
    count results that differ from the single-threaded ones (which must match eager)."""
    with torch.no_grad():
        eager = [[to_numpy(v) for v in _flat(model(*((x,) if not isinstance(x, tuple) else x)))] for x in inputs]
    cases = [tuple(to_numpy(a) for a in (x if isinstance(x, tuple) else (x,))) for x in inputs]
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "cases.pkl"
        data.write_bytes(pickle.dumps((cases, eager, atol, threads, calls)))
        completed = subprocess.run([sys.executable, "-c", _SCRIPT, str(artifact), str(data),
                                    json.dumps(options or {})], capture_output=True, text=True, timeout=600,
                                   env={**os.environ, **(env or {})})
    if completed.returncode != 0:
        raise AssertionError(f"host process failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [item for inner in value for item in _flat(inner)]
    return [value]
