"""Sub-DNN export: the TorchScript-based torch.onnx exporter (dycl's, ``dynamo=False``)
against the torch.export-based one (``dynamo=True``) on zoo models.

Each model and exporter runs in its own process (the dynamo exporter has crashed
the process with SIGSEGV on some sub-DNNs). Reported per row: compile seconds
(the sub-DNN compile phase, where export happens), the inconsistent rate and the
max error over N inputs, the median latency, or the failure.

    .venv/bin/python benchmarks/exporters.py [--n 20] [models.blockdrop ...]
    .venv/bin/python benchmarks/exporters.py --fuzz 30 --seed 5   # the fuzzer, with each exporter
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import subprocess
import sys
import time

_ROW = "EXPORTER-ROW "


def _use_exporter(dynamo: bool) -> None:
    import dycl.backends.onnxruntime as ort_backend
    from dycl.backends.onnx_export import export_onnx

    ort_backend.export_onnx = functools.partial(export_onnx, dynamo=dynamo)


def _one(name: str, dynamo: bool, n: int) -> dict:
    import warnings

    import dycl
    from dycl.harness import check

    warnings.simplefilter("ignore")
    _use_exporter(dynamo)
    zoo = importlib.import_module(name)
    model, example = zoo.build()
    start = time.perf_counter()
    compiled = dycl.compile(model, example)
    seconds = time.perf_counter() - start
    report = check(model, compiled, [zoo.sample(seed) for seed in range(n)], postprocess=zoo.postprocess,
                   traced=False)
    return {"model": name, "exporter": "dynamo" if dynamo else "torchscript", "compile_s": round(seconds, 2),
            "export_s": compiled.stats["seconds"]["compile"], "sub_dnns": compiled.stats["unique_compiled"],
            "eta": report.eta, "delta": round(report.delta, 2), "paths": report.paths,
            "latency_ms": round(report.compiled_ms, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["models.sdn_mobilenet", "models.skipnet_ff",
                                                       "models.blockdrop", "models.translation"])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--fuzz", type=int, default=0, help="run the fuzzer on this many programs instead")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "DYNAMO"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, dynamo = args.child
        if name == "fuzz":
            from dycl.fuzz.__main__ import main as fuzz

            _use_exporter(dynamo == "1")
            return fuzz(["--n", str(args.fuzz), "--seed", str(args.seed), "--backend", "onnxruntime",
                         "--max-shrinks", "0", "--regressions", "/tmp/dycl-exporter-regressions"])
        print(_ROW + json.dumps(_one(name, dynamo == "1", args.n)), flush=True)
        return 0
    for name in ["fuzz"] if args.fuzz else args.models:
        for dynamo in ("0", "1"):
            start = time.perf_counter()
            child = subprocess.run([sys.executable, __file__, "--child", name, dynamo, "--n", str(args.n),
                                    "--fuzz", str(args.fuzz), "--seed", str(args.seed)],
                                   capture_output=True, text=True)
            rows = [line[len(_ROW):] for line in child.stdout.splitlines() if line.startswith(_ROW)]
            if rows:
                print(rows[-1])
            elif name == "fuzz":
                tail = [line for line in child.stdout.splitlines() if line.strip()][-3:]
                print(json.dumps({"fuzz": args.fuzz, "seed": args.seed, "exporter": ["torchscript", "dynamo"][
                    int(dynamo)], "seconds": round(time.perf_counter() - start, 1), "rc": child.returncode,
                    "summary": tail}))
            else:
                error = (child.stderr.strip().splitlines() or ["?"])[-1]
                print(json.dumps({"model": name, "exporter": ["torchscript", "dynamo"][int(dynamo)],
                                  "failed": f"rc={child.returncode}: {error[:300]}"}))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
