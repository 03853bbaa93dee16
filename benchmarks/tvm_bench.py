"""Benchmark the TVM backend against ONNX Runtime; writes benchmarks/tvm_results.md.

    .venv/bin/python benchmarks/tvm_bench.py --trials 16           # kernels and every zoo model
    .venv/bin/python benchmarks/tvm_bench.py --trials 32 --zoo models.sdn_vgg19
    .venv/bin/python benchmarks/tvm_bench.py --target x86-64-v3    # AVX2 + FMA code

Kernels (a 1024x1024 matmul, a small conv-net sub-DNN): ONNX Runtime, and TVM
with no schedules, with TVM's own CPU schedules (DLight), with dycl's default
schedules and tuned with MetaSchedule, side by side in one run: the median of
interleaved rounds (the machine may be busy). Zoo models: compile time and the
median latency per input of the whole compiled model (host + sub-DNNs).
Tuning records go to a scratch cache unless --cache is given, so every run tunes.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dycl.hostgen.manifest import Port, SubDNNEntry  # noqa: E402

import dycl  # noqa: E402
from dycl.backends.tvm import BuildJob, TvmBackend, TvmOptions, compile_onnx  # noqa: E402
from dycl.harness import check  # noqa: E402
from models import ZOO  # noqa: E402


class MatMul(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1024, 1024) / 32)

    def forward(self, x):
        return (x @ self.weight,)


class ConvNet(nn.Module):
    """A sub-DNN shaped like the zoo's: conv-BN-ReLU, a residual conv, pooling, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(16, 32, 3, padding=1)
        self.bn = nn.BatchNorm2d(32)
        self.b = nn.Conv2d(32, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 16 * 16, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.a(x)))
        y = torch.relu(self.b(y)) + y
        y = nn.functional.max_pool2d(y, 2)
        return (torch.softmax(self.fc(y.flatten(1)), -1),)


def onnx_bytes(model: nn.Module, example: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (example,), buffer, dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["y:out"])
    return buffer.getvalue()


def interleaved(runners: dict[str, object], rounds: int, inner: int) -> dict[str, float]:
    """Median milliseconds per call, the contenders taking turns."""
    times: dict[str, list[float]] = {name: [] for name in runners}
    for run in runners.values():
        run()  # warm up
    for _ in range(rounds):
        for name, run in runners.items():
            start = time.perf_counter()
            for _ in range(inner):
                run()
            times[name].append((time.perf_counter() - start) / inner * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def bench_kernel(label: str, model: nn.Module, example: torch.Tensor, args) -> list[str]:
    import onnxruntime as ort

    from dycl.backends.onnxruntime import session_options

    data = onnx_bytes(model, example)
    x = example.numpy()
    with torch.no_grad():
        expected = model(example)[0].numpy()
    entry = SubDNNEntry("library.so", "0" * 64, (Port("x", "tensor", "float32", ()),),
                        (Port("y:out", "tensor", "float32", ()),))
    runners, compile_s, notes = {}, {}, {}
    start = time.perf_counter()
    session = ort.InferenceSession(data, session_options(), providers=["CPUExecutionProvider"])
    compile_s["onnxruntime"] = time.perf_counter() - start
    runners["onnxruntime"] = lambda: session.run(None, {"x": x})
    slow = example.numel() >= 1 << 20
    levels = [("tvm: no schedules", "none", 0), ("tvm: TVM's CPU schedules (dlight)", "dlight", 0),
              ("tvm: dycl default schedules", "dycl", 0)]
    if args.trials:
        levels.append((f"tvm: dycl + MetaSchedule {args.trials} trials", "dycl", args.trials))
    for name, schedule, trials in levels:
        options = TvmOptions.from_env(target=args.target, schedule=schedule, tune_trials=trials,
                                      cache_dir=args.cache, build_cache=False)
        start = time.perf_counter()
        (library,), stats = compile_onnx([BuildJob(label, data, ("x",))], options)
        compile_s[name] = time.perf_counter() - start
        if trials:
            notes[name] = stats.get("tuning")
        executable = TvmBackend().executable(library, entry, None)
        error = float(np.abs(executable(x)[0] - expected).max())
        assert error < 1e-2, (name, error)
        runners[name] = lambda executable=executable: executable(x)
    slow_ones = {k: v for k, v in runners.items() if slow and ("no schedules" in k or "dlight" in k)}
    fast_ones = {k: v for k, v in runners.items() if k not in slow_ones}
    medians = interleaved(fast_ones, rounds=args.rounds, inner=1 if slow else 20)
    if slow_ones:
        medians.update(interleaved(slow_ones, rounds=2, inner=1))
    lines = [f"### {label} ({args.target}, {os.cpu_count()} CPUs)", "",
             "| | compile s | median ms | vs ONNX Runtime |", "|---|---:|---:|---:|"]
    for name in runners:
        ratio = medians[name] / medians["onnxruntime"]
        lines.append(f"| {name} | {compile_s[name]:.1f} | {medians[name]:.3f} | {ratio:.2f}x |")
    for name, note in notes.items():
        lines += ["", f"{name}: {note}"]
    return lines + [""]


def bench_zoo(name: str, args) -> list[str]:
    """One zoo model: compile time (nothing cached) and median latency per input on ONNX
    Runtime, TVM untuned and TVM tuned, interleaved on the same inputs; eta and delta of
    each against eager on the same inputs. Static shapes (``dynamic=False``): MetaSchedule
    tunes kernels of static shape only."""
    zoo = importlib.import_module(name)
    model, example = zoo.build()
    inputs = [zoo.sample(seed) for seed in range(args.inputs)]
    contenders = [("onnxruntime", "onnxruntime", {})]
    contenders.append(("tvm", "tvm", {"target": args.target, "build_cache": False, "cache_dir": args.cache}))
    if args.trials:
        contenders.append((f"tvm tuned ({args.trials} trials)", "tvm",
                           {"target": args.target, "build_cache": False, "cache_dir": args.cache,
                            "tune_trials": args.trials}))
    rows = {}
    for label, backend, options in contenders:
        start = time.perf_counter()
        compiled = dycl.compile(model, example, backend=backend, dynamic=False, **options)
        rows[label] = {"compile_s": time.perf_counter() - start, "model": compiled, "stats": compiled.stats}
        report = check(model, compiled, inputs, postprocess=zoo.postprocess, traced=False)
        rows[label].update(eta=report.eta, delta=report.delta, paths=report.paths)
    eager_times = []
    times: dict[str, list[float]] = {label: [] for label in rows}
    with torch.no_grad():
        for _ in range(args.rounds):
            for x in inputs:
                arguments = x if isinstance(x, tuple) else (x,)
                start = time.perf_counter()
                model(*arguments)
                eager_times.append(time.perf_counter() - start)
                for label, row in rows.items():
                    start = time.perf_counter()
                    row["model"](*arguments)
                    times[label].append(time.perf_counter() - start)
    lines = [f"### {name} ({len(inputs)} inputs x {args.rounds} rounds, {args.target}, {os.cpu_count()} CPUs; "
             f"eager {statistics.median(eager_times) * 1e3:.2f} ms)", "",
             "| backend | compile s | median ms per input | vs ONNX Runtime | eta | delta | paths |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    base = statistics.median(times["onnxruntime"])
    for label, row in rows.items():
        median = statistics.median(times[label])
        backend_stats = row["stats"].get("backend", {})
        extra = f" ({row['stats']['unique_compiled']} sub-DNNs"
        if "build_s" in backend_stats:
            extra += f", build {backend_stats['build_s']:.1f} s"
        if backend_stats.get("tune_s"):
            extra += f", tuning {backend_stats['tune_s']:.0f} s"
        lines.append(f"| {label} | {row['compile_s']:.1f}{extra}) | {median * 1e3:.2f} | {median / base:.2f}x "
                     f"| {row['eta']:.3f} | {row['delta']:.2f} | {row['paths']} |")
    for label, row in rows.items():
        tuning = row["stats"].get("backend", {}).get("tuning")
        if tuning:
            lines += ["", f"{label}: {tuning}"]
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="x86-64-v2", help="LLVM CPU (x86-64-v2, x86-64-v3, x86-64-v4)")
    parser.add_argument("--trials", type=int, default=0, help="MetaSchedule trials per kernel (0: no tuning)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inputs", type=int, default=20, help="zoo inputs (seeds 0..n-1)")
    parser.add_argument("--zoo", default="all", help="comma-separated zoo modules, or all (default)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("tvm_results.md"))
    parser.add_argument("--no-kernels", action="store_true")
    parser.add_argument("--cache", default=None, help="tuning cache directory (default: a fresh scratch one)")
    args = parser.parse_args()
    scratch = tempfile.TemporaryDirectory(prefix="dycl-bench-")
    args.cache = args.cache or os.path.join(scratch.name, "tvm")
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    lines = [f"# TVM backend against ONNX Runtime ({platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs, TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS', 'default')})", "",
             "Command: `" + " ".join(["python", *sys.argv]) + "`", ""]

    def emit(new: list[str]) -> None:
        lines.extend(new)
        print("\n".join(new), flush=True)
        args.out.write_text("\n".join(lines) + "\n")

    if not args.no_kernels:
        emit(bench_kernel("matmul 1024x1024", MatMul(), torch.randn(1024, 1024), args))
        emit(bench_kernel("conv net sub-DNN (1x16x32x32)", ConvNet().eval(), torch.randn(1, 16, 32, 32), args))
    names = list(ZOO) if args.zoo == "all" else list(filter(None, args.zoo.split(",")))
    for name in names:
        emit(bench_zoo(name, args))


if __name__ == "__main__":
    main()
