"""Backend: Apache TVM (Relax) on CPU.

Each sub-DNN variant is exported to ONNX (the ONNX Runtime backend's export),
imported with ``relax.frontend.onnx.from_onnx`` (symbolic dimensions stay
symbolic), legalized and fused, scheduled for the CPU, built for LLVM and
exported as a shared library: the bytes of that ``.so`` are the artifact. The
host loads it with the TVM runtime alone (``tvm.runtime``, copied into the host).

Schedules (``schedule=``, env ``DYCL_TVM_SCHEDULE``):

- ``"none"``: ``relax.build``'s default pipeline, no fusion, no schedules (one
  serial loop nest per operator).
- ``"dlight"``: what TVM 0.27 ships for CPU: the CPU pipeline's fusion plus the
  DLight CPU rules (``GEMV``, ``Reduction``). There is no CPU rule for matmul or
  convolution.
- ``"dycl"`` (default): the above plus this module's two rules: a register-tiled
  schedule for functions with one reduction (matmul, convolution, pooling:
  output tile accumulated in registers, vectorized along the output's last
  axis, epilogue fused, outer loops parallel) and, for everything else,
  parallel outer loops with a vectorized inner loop.

Tuning (``tune_trials=N`` trials per distinct kernel, env ``DYCL_TVM_TUNE_TRIALS``)
runs MetaSchedule in a child process and keeps a tuned schedule only where it
beats the default one; the winning traces are cached on disk under
``$DYCL_CACHE/tvm/tuning`` (default ``~/.cache/dycl``) and reused by later
compiles, so each kernel is tuned once. Finished libraries are cached too
(``$DYCL_CACHE/tvm/builds``, keyed by the ONNX bytes, the options, the TVM
version and this file).

Symbolic dims (``dynamic=``) cost TVM much more than ONNX Runtime: a kernel over
a symbolic extent gets no tiling and no tuning, and a symbolic-batch VGG ran 5x
slower than its static build. So a sub-DNN with symbolic dims is built twice
(``specialize=``, env ``DYCL_TVM_SPECIALIZE``; on by default): for its example's
exact shapes, with every schedule and tuning, and for any shape; the host runs
the first whenever the inputs have the example's shapes (``specialized.py``).
Compile time and artifact size double for those sub-DNNs.

The target is a generic x86-64 CPU (``x86-64-v2``: SSE4.2, what every x86-64
server and desktop since 2009 runs and the baseline of current Linux
distributions), not ``-mcpu=native``: an artifact must run on other machines, and
code for a newer CPU than the one it lands on dies with SIGILL. ``target=`` /
``DYCL_TVM_TARGET`` takes another LLVM CPU name (``x86-64-v3`` for AVX2+FMA
machines, ``x86-64-v4`` for AVX-512) or a JSON target dict.

Workarounds for apache-tvm 0.27.0.post1 with apache-tvm-ffi 0.1.15.post2 (see
``tuning_problems``): serializing any object with a dtype field
(``tvm.ir.save_json(tvm.ir.PrimType("int32"))``) segfaults, so MetaSchedule runs
without the JSON database, without process-pool builders and runners (they
pickle modules), with the replay-func search (evolutionary search deep-copies
modules through JSON) and without the two mutators that save JSON; importing
``tvm.s_tir.tensor_intrin`` (which MetaSchedule does first) parses every GPU
intrinsic and takes about 100 s, so the tuning process stubs it (no CPU rule for
a generic x86 target uses those intrinsics).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dycl.backends.base import BackendBase, CompiledVariant, OnnxStep
from dycl.backends.tvm.options import DEFAULT_CPU, SCHEDULES, TvmOptions
from dycl.backends.tvm.recurrent import recurrent_layers_unrolled
from dycl.backends.tvm.specialized import example_shapes, pack
from dycl.backends.tvm.tuning import tuning_problems
from dycl.backends.tvm.workers import BuildJob, compile_onnx
from dycl.hostgen.copies import copied
from dycl.hostgen.manifest import SubDNNEntry


class TvmBackend(BackendBase):
    name = "tvm"
    file_suffix = ".so"
    runtime = copied(Path(__file__).with_name("runtime.py"))  # not imported here: importing it loads TVM
    standalone = True

    def __init__(self, tune_trials: int | None = None, target: str | None = None, schedule: str | None = None,
                 jobs: int | None = None, cache_dir: str | None = None, build_cache: bool | None = None,
                 specialize: bool | None = None) -> None:
        explicit = {"tune_trials": tune_trials, "target": target, "schedule": schedule, "jobs": jobs,
                    "cache_dir": cache_dir, "build_cache": build_cache, "specialize": specialize}
        super().__init__()
        self.options = TvmOptions.from_env(**{k: v for k, v in explicit.items() if v is not None})

    # -- the Backend interface -------------------------------------------------------------------------------------

    def compile(self, module, variant, onnx_step: OnnxStep | None = None) -> CompiledVariant:
        return self.compile_many([module], [variant], onnx_step=onnx_step)[0]

    def executable(self, data: bytes, entry: SubDNNEntry, module):
        from dycl.backends.tvm import runtime  # loads TVM's runtime, once per process

        return runtime.load_executable(data, entry)

    def compile_many(self, modules: Sequence[Any], variants: Sequence[Any],
                     progress: Callable[[str], None] | None = None,
                     onnx_step: OnnxStep | None = None) -> list[CompiledVariant]:
        """Compile distinct sub-DNN variants: ONNX export here (each graph through ``onnx_step``),
        tuning (if asked) in one child process, builds in parallel child processes.
        ``progress(name)`` is called as each one finishes."""
        start = time.perf_counter()
        jobs, guards, static_job = self._jobs(modules, variants, onnx_step)
        export_s = time.perf_counter() - start

        def finished(name: str) -> None:
            if progress and not name.endswith(_STATIC):
                progress(name)

        built, self.last_stats = compile_onnx(jobs, self.options, finished)
        self.last_stats["export_s"] = round(export_s, 3)
        self.last_stats["specialized"] = len(static_job)
        libraries = built[:len(variants)]  # the generic builds come first, in variant order
        for index, job in static_job.items():
            libraries[index] = pack(built[job], libraries[index], example_shapes(variants[index].examples[0]))
        untuned = self.last_stats.get("tuning", {}).get("symbolic_untuned", 0)
        if untuned and not static_job:
            warnings.warn(f"tune_trials={self.options.tune_trials}: {untuned} kernels have symbolic dims and keep "
                          "the default schedules (MetaSchedule measures fixed shapes); compile with "
                          "dynamic=False to tune every kernel", stacklevel=2)
        return [CompiledVariant(f"{variant.name}{self.file_suffix}", data, guards[index],
                                {"specialized": index in static_job})
                for index, (variant, data) in enumerate(zip(variants, libraries))]

    def _jobs(self, modules: Sequence[Any], variants: Sequence[Any],
              onnx_step: OnnxStep | None) -> tuple[list[BuildJob], list[tuple[Any, ...]], dict[int, int]]:
        """The build jobs (every variant's generic build first, in order, then the example-shaped
        ones), each variant's shape guards, and variant index -> its example-shaped job. The
        example-shaped builds need no guards (the host checks their shapes), and none is made
        where ``onnx_step`` may change the graph's shapes."""
        from dycl.backends.onnxruntime import OnnxRuntimeBackend

        exporter = OnnxRuntimeBackend()
        jobs: list[BuildJob] = []
        guards: list[tuple[Any, ...]] = []
        static_job: dict[int, int] = {}
        with recurrent_layers_unrolled():  # TVM's ONNX frontend has no LSTM, GRU or RNN operator
            for module, variant in zip(modules, variants):
                exported = exporter.compile(module, variant, onnx_step)
                guards.append(exported.guards)
                jobs.append(BuildJob(variant.name, exported.data, tuple(p.name for p in variant.inputs)))
            for index, (module, variant) in enumerate(zip(modules, variants)):
                if self.options.specialize and onnx_step is None and _has_symbolic_dims(variant):
                    static_job[index] = len(jobs)
                    jobs.append(BuildJob(f"{variant.name}{_STATIC}", exporter.export(module, variant, static=True)[0],
                                         jobs[index].inputs))
        return jobs, guards, static_job


_STATIC = "@static"


def _has_symbolic_dims(variant) -> bool:
    return any(isinstance(dim, str) for port in (*variant.inputs, *variant.outputs) for dim in port.shape)


__all__ = ["DEFAULT_CPU", "SCHEDULES", "BuildJob", "TvmBackend", "TvmOptions", "compile_onnx", "tuning_problems"]
