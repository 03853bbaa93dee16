"""The interface every backend implements (``Backend``), what it returns for each sub-DNN
variant (``CompiledVariant``), and ``BackendBase``, the one-by-one ``compile_many`` that a
backend without its own shares.

Everything the compiler asks of a backend is declared here and comes back in a
``CompiledVariant``: the compiler never probes a backend with ``getattr``/``hasattr`` and
never reads state a compile left behind (but ``last_stats``, the summary of a whole
``compile_many``).

The one post-export ONNX step: a backend that exports ONNX (ONNX Runtime, and TVM, which
builds from it) passes each exported graph through the ``onnx_step`` it is given before it
compiles it (the execution mode's, ``dycl.per_sample.mode``; None: the graph as exported).
A step may change the graph's input shapes (a group model's leading axis), so a backend
builds nothing for the example's exact shapes when one is given."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only: a TVM build worker imports the backends without torch
    from dycl.export.subdnn import SubDNNModule
    from dycl.hcfg.ports import Variant
    from dycl.hostgen.manifest import ShapeGuard, SubDNNEntry

#: ``(exported ONNX bytes, variant) -> ONNX bytes`` the backend compiles instead
OnnxStep = Callable[[bytes, "Variant"], bytes]


@dataclasses.dataclass(frozen=True)
class CompiledVariant:
    """One sub-DNN variant, compiled: its graph's ``file`` (named by the variant) and ``data``,
    the shape conditions the graph needs (``dycl.export.shape_guards``; most need none), what its
    compile did (``stats``), the graphs traced at other sizes that the host tries when the
    guards fail (``alternatives``, in order: ``dycl.export.alternatives``) and whether it is
    small enough to run on the calling thread (``dycl.backends.onnx_cost``)."""

    file: str
    data: bytes
    guards: tuple[ShapeGuard, ...] = ()
    stats: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    alternatives: tuple[CompiledVariant, ...] = ()
    on_calling_thread: bool = False
    #: whether its session's pool spins while a run lasts (``dycl.backends.spin_choice``)
    spins_in_run: bool = False
    #: an ONNX graph's named input dims at its example (``dycl.backends.example_sizes``): the host's
    #: first specialized session
    example_sizes: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def files(self) -> dict[str, bytes]:
        """Every file this variant puts in the artifact: its own, then its alternatives'."""
        found = {self.file: self.data}
        for other in self.alternatives:
            found.update(other.files)
        return found


class Backend(Protocol):
    name: str
    file_suffix: str
    #: source defining ``runtime_options(...)`` and ``load_executable(data: bytes, entry: SubDNNEntry,
    #: options)`` in the generated host (``entry``: the manifest's, read by attribute)
    runtime: str
    #: whether a saved artifact can run without torch
    standalone: bool
    #: whether the graphs it compiles may contain ONNX ``Scan`` (an ``onnx_step`` that makes one checks this)
    runs_onnx_scan: bool
    #: what the last ``compile_many`` did (seconds per phase, cache hits, ...), for ``stats["backend"]``
    last_stats: dict[str, Any]

    def compile(self, module: SubDNNModule, variant: Variant, onnx_step: OnnxStep | None = None) -> CompiledVariant:
        ...

    def compile_many(self, modules: Sequence[SubDNNModule], variants: Sequence[Variant],
                     progress: Callable[[str], None] | None = None,
                     onnx_step: OnnxStep | None = None) -> list[CompiledVariant]: ...

    def executable(self, data: bytes, entry: SubDNNEntry, module: SubDNNModule): ...


class BackendBase:
    """A backend's state, empty, and ``compile_many`` as ``compile`` of each variant in turn."""

    runs_onnx_scan = False

    def __init__(self) -> None:
        self.last_stats: dict[str, Any] = {}

    def compile(self, module: SubDNNModule, variant: Variant, onnx_step: OnnxStep | None = None) -> CompiledVariant:
        raise NotImplementedError

    def compile_many(self, modules: Sequence[SubDNNModule], variants: Sequence[Variant],
                     progress: Callable[[str], None] | None = None,
                     onnx_step: OnnxStep | None = None) -> list[CompiledVariant]:
        """Compile distinct sub-DNN variants one by one, ``progress(name)`` after each."""
        compiled = []
        for module, variant in zip(modules, variants):
            compiled.append(self.compile(module, variant, onnx_step))
            if progress is not None:
                progress(variant.name)
        return compiled


__all__ = ["Backend", "BackendBase", "CompiledVariant", "OnnxStep"]
