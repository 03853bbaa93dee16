"""Building sub-DNN libraries: cached results, parallel worker processes, progress."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dycl.backends.tvm.lowering import build_library
from dycl.backends.tvm.options import TvmOptions, atomic_write
from dycl.progress import waiting


@dataclass(frozen=True)
class BuildJob:
    """One sub-DNN variant to build: its ONNX bytes and its input port names, in order."""

    name: str
    onnx: bytes
    inputs: tuple[str, ...]


@dataclass
class BuildResult:
    name: str
    data: bytes
    seconds: float
    cached: bool



def compile_onnx(jobs: list[BuildJob], options: TvmOptions,
                 progress: Callable[[str], None] | None = None) -> tuple[list[bytes], dict[str, Any]]:
    """Tune (if asked: one child process) and build (child processes) ONNX sub-DNNs;
    the libraries and what it took."""
    stats: dict[str, Any] = {}
    if options.tune_trials > 0:
        start = time.perf_counter()
        with waiting(f"tuning {len(jobs)} sub-DNNs, {options.tune_trials} trials per kernel"):
            stats["tuning"] = _run_workers("tune", jobs, options, 1, None)
        stats["tune_s"] = round(time.perf_counter() - start, 3)
    start = time.perf_counter()
    results = _build_all(jobs, options, progress)
    stats["build_s"] = round(time.perf_counter() - start, 3)
    stats["build_cache_hits"] = sum(1 for r in results if r.cached)
    stats["per_sub_dnn_s"] = {r.name: round(r.seconds, 3) for r in results}
    return [r.data for r in results], stats



def _build_all(jobs: list[BuildJob], options: TvmOptions, progress: Callable[[str], None] | None) -> list[BuildResult]:
    results: list[BuildResult | None] = [None] * len(jobs)
    todo = []
    for i, job in enumerate(jobs):
        cached = _cached_build(job, options)
        if cached is not None:
            results[i] = BuildResult(job.name, cached, 0.0, True)
            if progress:
                progress(job.name)
        else:
            todo.append(i)
    workers = min(options.jobs or os.cpu_count() or 1, len(todo))
    if workers > 1:
        built = _run_workers("build", [jobs[i] for i in todo], options, workers, progress)
        for i, result in zip(todo, built):
            results[i] = result
    else:
        for i in todo:
            results[i] = build_job(jobs[i], options)
            if progress:
                progress(jobs[i].name)
    return results  # type: ignore[return-value]


# Worker processes are fresh interpreters that import only this module, TVM and
# onnx: not the dycl package (so not torch, which tvm_ffi would otherwise import),
# and not the caller's __main__ (which multiprocessing's spawn would re-run).
_WORKER = """
import sys, types
sys.modules["torch"] = None
for name, path in (("dycl", sys.argv[1]), ("dycl.backends", sys.argv[1] + "/backends")):
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package
from dycl.backends.tvm.worker_main import serve
serve(sys.argv[2], sys.argv[3])
"""
MARK = "@@dycl-tvm "


def _run_workers(kind: str, jobs: list[BuildJob], options: TvmOptions, workers: int,
                 progress: Callable[[str], None] | None) -> Any:
    """Run ``kind`` over ``jobs`` in ``workers`` processes (the largest ONNX files
    first, each to the least loaded worker); the build results in order, or the
    tuning summary."""
    import pickle
    import subprocess
    import threading

    root = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryDirectory(prefix="dycl-tvm-") as scratch:
        shares: list[list[tuple[int, BuildJob]]] = [[] for _ in range(workers)]
        loads = [0] * workers
        for index in sorted(range(len(jobs)), key=lambda i: -len(jobs[i].onnx)):
            least = loads.index(min(loads))
            shares[least].append((index, jobs[index]))
            loads[least] += len(jobs[index].onnx)
        processes = []
        for number, share in enumerate(shares):
            request = Path(scratch, f"request{number}.pkl")
            request.write_bytes(pickle.dumps((kind, jobs if kind == "tune" else share, options)))
            log = open(Path(scratch, f"log{number}.txt"), "wb")  # noqa: SIM115 - closed below
            process = subprocess.Popen([sys.executable, "-c", _WORKER, root, str(request), scratch],
                                       stdout=subprocess.PIPE, stderr=log, text=True)
            processes.append((process, log))

        def follow(process) -> None:
            for line in process.stdout:
                if line.startswith(MARK) and progress and kind == "build":
                    progress(jobs[int(line[len(MARK):])].name)

        readers = [threading.Thread(target=follow, args=(process,), daemon=True) for process, _ in processes]
        for reader in readers:
            reader.start()
        failures = []
        for number, ((process, log), reader) in enumerate(zip(processes, readers)):
            process.wait()
            reader.join()
            log.close()
            if process.returncode != 0:
                tail = Path(scratch, f"log{number}.txt").read_text(errors="replace")[-3000:]
                failures.append(f"worker {number} exited with {process.returncode}:\n{tail}")
        if kind == "tune":
            reply = Path(scratch, "tune.pkl")
            if not reply.is_file():
                return {"error": "the tuning process failed; built with the default schedules",
                        "detail": "\n".join(failures)[-2000:]}
            return pickle.loads(reply.read_bytes())
        if failures:
            raise RuntimeError("building sub-DNNs with TVM failed:\n" + "\n".join(failures))
        return [pickle.loads(Path(scratch, f"{i}.pkl").read_bytes()) for i in range(len(jobs))]


@functools.cache
def _source_digest() -> str:
    """This package's source: a change to how libraries are built invalidates cached ones."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _build_key(job: BuildJob, options: TvmOptions) -> str:
    import tvm

    described = json.dumps({"target": options.target_dict(), "schedule": options.schedule,
                            "tuned": options.tune_trials > 0, "inputs": job.inputs, "tvm": tvm.__version__,
                            "source": _source_digest()}, sort_keys=True)
    return hashlib.sha256(described.encode() + job.onnx).hexdigest()[:32]


def _cached_build(job: BuildJob, options: TvmOptions) -> bytes | None:
    if not options.build_cache or options.tune_trials > 0:  # tuned builds depend on the tuning cache's state
        return None
    path = Path(options.cache_dir) / "builds" / f"{_build_key(job, options)}.so"
    return path.read_bytes() if path.is_file() else None



def build_job(job: BuildJob, options: TvmOptions) -> BuildResult:
    """ONNX → Relax → schedules → LLVM → ``.so`` bytes (runs in a worker process)."""
    start = time.perf_counter()
    data = build_library(job.onnx, job.inputs, options)
    if options.build_cache and options.tune_trials == 0:
        with contextlib.suppress(OSError):  # a read-only cache only costs time
            atomic_write(Path(options.cache_dir) / "builds" / f"{_build_key(job, options)}.so", data)
    return BuildResult(job.name, data, time.perf_counter() - start, False)

