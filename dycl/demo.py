"""``make demo``: rewrite a zoo model and show that the result behaves like the original.

Later issues turn this into the full compile → standalone host → harness report.
"""

from __future__ import annotations

import importlib
import sys
import time

import torch

import rewriter
from dycl.testing import assert_equivalent


def main(model_name: str = "models.sdn_resnet56", samples: int = 50) -> None:
    zoo = importlib.import_module(model_name)
    model, _ = zoo.build()
    start = time.perf_counter()
    rewritten = rewriter.rewrite(model)
    seconds = time.perf_counter() - start
    print(f"# {model_name}: forward() rewritten in {seconds * 1000:.0f} ms\n")
    print(rewritten.source)
    inputs = [zoo.sample(seed) for seed in range(samples)]
    with torch.no_grad():
        paths = assert_equivalent(model, rewritten.bind(model), inputs, min_paths=2)
    print(f"rewritten forward() == original forward() on {samples} inputs, "
          f"{paths} distinct execution paths")


if __name__ == "__main__":
    main(*sys.argv[1:2])
