"""The interface every backend implements (``Backend``), and ``BackendBase``, the state and
the one-by-one ``compile_many`` that a backend without its own shares.

Everything the compiler asks of a backend is declared here: it never probes a backend with
``getattr``/``hasattr``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only: a TVM build worker imports the backends without torch
    from dycl.hcfg.ports import Variant
    from dycl.hostgen.manifest import ShapeGuard, SubDNNEntry
    from dycl.subdnn import SubDNNModule


class Backend(Protocol):
    name: str
    file_suffix: str
    #: source defining ``runtime_options(...)`` and ``load_executable(data: bytes, entry: SubDNNEntry,
    #: options)`` in the generated host (``entry``: the manifest's, read by attribute)
    runtime: str
    #: whether a saved artifact can run without torch
    standalone: bool
    #: variant name -> the shape conditions its graph needs (``dycl.shape_guards``), for the manifest
    guards: dict[str, tuple[ShapeGuard, ...]]
    #: what the last ``compile_many`` did (seconds per phase, cache hits, ...), for ``stats["backend"]``
    last_stats: dict[str, Any]
    #: set by the compiler for ``per_sample=True``: build each sub-DNN's group model (``dycl.per_sample``)
    per_sample: bool

    def compile(self, module: SubDNNModule, variant: Variant) -> bytes: ...

    def compile_many(self, modules: Sequence[SubDNNModule], variants: Sequence[Variant],
                     progress: Callable[[str], None] | None = None) -> list[bytes]: ...

    def executable(self, data: bytes, entry: SubDNNEntry, module: SubDNNModule): ...


class BackendBase:
    """A backend's state, empty, and ``compile_many`` as ``compile`` of each variant in turn."""

    def __init__(self) -> None:
        self.guards: dict[str, tuple[ShapeGuard, ...]] = {}
        self.last_stats: dict[str, Any] = {}
        self.per_sample = False

    def compile(self, module: SubDNNModule, variant: Variant) -> bytes:
        raise NotImplementedError

    def compile_many(self, modules: Sequence[SubDNNModule], variants: Sequence[Variant],
                     progress: Callable[[str], None] | None = None) -> list[bytes]:
        """Compile distinct sub-DNN variants one by one, ``progress(name)`` after each."""
        compiled = []
        for module, variant in zip(modules, variants):
            compiled.append(self.compile(module, variant))
            if progress is not None:
                progress(variant.name)
        return compiled


__all__ = ["Backend", "BackendBase"]
