"""An opt-in, content-addressed cache of ONNX exports (``cache_dir=`` or ``DYCL_CACHE_DIR``).

Exporting every sub-DNN is most of an ONNX Runtime compile. With a cache directory
given (``dycl.compile(model, x, cache_dir="~/.cache/dycl/onnx")``, or the
``DYCL_CACHE_DIR`` environment variable), each export is stored under the sha256 of
everything it depends on, and a later compile that would export the same thing reads
it back instead:

- the sub-DNN's generated source (its statements, as ``dycl.export.subdnn`` runs them) and
  its variant fingerprint (ports, dtypes, symbolic dims, list layouts);
- the example shapes and dtypes it is traced at, and whether it is exported static;
- every parameter and buffer of the model (names, dtypes, shapes and bytes);
- the global values the sub-DNN's code reads (numbers, strings, tensors by content;
  other objects by their type and name);
- the versions of Python, torch, onnx and dycl.

A hit returns the same bytes and the same shape guards the export gave; an export
that fails is never stored. Not stored: the export's own warnings (a hit does not
repeat them). Files are written atomically (a temporary file, then ``os.replace``),
so concurrent compiles may share a directory; an unreadable entry is a miss. Nothing
is written anywhere unless a directory is given. Hits and misses are logged on the
``dycl.cache`` logger (DEBUG) and counted in ``hits``/``misses``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import onnx
import torch

from dycl.export.subdnn import SubDNNModule
from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import DYCL_VERSION, ShapeGuard
from dycl.log import get_logger

_LOG = get_logger("cache")
ENVIRONMENT = "DYCL_CACHE_DIR"


def _tensor_digest(tensor: torch.Tensor) -> str:
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return f"{tensor.dtype}{tuple(tensor.shape)}{hashlib.sha256(data).hexdigest()}"


def _value(value: Any) -> str:
    """A global a sub-DNN reads, as text that changes when its value does."""
    if isinstance(value, torch.Tensor):
        return _tensor_digest(value)
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list, frozenset)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return repr(value)
    return f"{type(value).__module__}.{type(value).__qualname__}:{getattr(value, '__qualname__', '')}"


class ExportCache:
    """The cache in ``directory`` (created on first write)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory).expanduser()
        self.hits = 0
        self.misses = 0
        self._weights: dict[int, str] = {}  # id(model) -> digest, once per compile (one backend per compile)

    def key(self, module: SubDNNModule, variant: Variant, static: bool) -> str:
        function = module.function
        reads = {name: _value(function.__globals__[name]) for name in sorted(function.__code__.co_names)
                 if name in function.__globals__}
        examples = [[(str(getattr(a, "dtype", type(a).__name__)), tuple(getattr(a, "shape", ()))) for a in example]
                    for example in variant.examples]
        text = json.dumps({"source": module.source, "variant": variant.fingerprint(), "examples": examples,
                           "static": static, "weights": self._weights_of(module.source_model), "globals": reads,
                           "versions": [platform.python_version(), torch.__version__, onnx.__version__,
                                        DYCL_VERSION]}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def _weights_of(self, model: torch.nn.Module) -> str:
        if id(model) not in self._weights:
            digest = hashlib.sha256()
            for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
                digest.update(f"{name}:{_tensor_digest(tensor)};".encode())
            self._weights[id(model)] = digest.hexdigest()
        return self._weights[id(model)]

    def get(self, key: str) -> tuple[bytes, tuple[ShapeGuard, ...]] | None:
        try:
            data = (self.directory / f"{key}.onnx").read_bytes()
            meta = json.loads((self.directory / f"{key}.json").read_text())
            if hashlib.sha256(data).hexdigest() != meta["sha256"]:
                raise ValueError("checksum")
            guards = tuple(ShapeGuard.from_json(g, f"guards[{i}]") for i, g in enumerate(meta["guards"]))
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            _LOG.debug("compile cache miss %s", key[:16])
            return None
        self.hits += 1
        _LOG.debug("compile cache hit %s (%s)", key[:16], self.directory)
        return data, guards

    def put(self, key: str, data: bytes, guards: tuple[ShapeGuard, ...]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        meta = {"sha256": hashlib.sha256(data).hexdigest(), "guards": [g.to_json() for g in guards]}
        self._write(f"{key}.onnx", data)
        self._write(f"{key}.json", json.dumps(meta).encode())  # last: an entry is whole once this exists

    def _write(self, name: str, data: bytes) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.replace(temporary, self.directory / name)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def cache_from(cache_dir: str | os.PathLike | None) -> ExportCache | None:
    """The cache in ``cache_dir``, else in ``$DYCL_CACHE_DIR``; None (no caching) if neither is set."""
    chosen = cache_dir if cache_dir is not None else os.environ.get(ENVIRONMENT) or None
    return ExportCache(chosen) if chosen is not None else None


__all__ = ["ENVIRONMENT", "ExportCache", "cache_from"]
