"""What ``print(compiled)`` and Jupyter show for a compiled model.

Assumes only the ``Manifest`` (so a model loaded from an artifact is summarised like
a freshly compiled one) and, where present, the compile's ``stats``. Guarantees a
few plain lines — model, backend, sub-DNN and condition counts, each input with its
dtype and shape (a symbolic dim by its name) and the outputs — and the same as an
HTML table for ``_repr_html_`` (every value escaped).
"""

from __future__ import annotations

import html
from typing import Any

from dycl.hostgen.manifest import Manifest


def _shape(shape: Any) -> str:
    return "[" + ", ".join(str(dim) for dim in shape) + "]" if shape is not None else "?"


def rows(manifest: Manifest, stats: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, value) pairs, in the order they are shown."""
    files = {entry.file for entry in manifest.sub_dnns.values()}
    counts = (f"{stats['sub_dnns']} sub-DNNs ({stats.get('unique_compiled', len(files))} compiled), "
              f"{stats['conditions']} conditions" if "sub_dnns" in stats
              else f"{len(manifest.sub_dnns)} sub-DNN variants in {len(files)} files")
    found = [("model", manifest.model), ("backend", f"{manifest.backend} (dycl {manifest.dycl_version})"),
             ("program", counts)]
    if manifest.per_sample:
        found.append(("batching", "per_sample=True: each sample takes its own path"))
    found += [(f"input {port.name}", f"{port.dtype} {_shape(port.shape)}" if port.kind == "tensor" else port.kind)
              for port in manifest.inputs]
    found += [(f"output {out.name}", f"{out.dtype} {_shape(out.shape or out.example_shape)}" if out.dtype
               else out.kind) for out in manifest.outputs]
    if manifest.dynamic_dims:
        found.append(("symbolic dims", ", ".join(sorted(manifest.dynamic_dims))))
    return found


def text(manifest: Manifest, stats: dict[str, Any]) -> str:
    found = rows(manifest, stats)
    width = max(len(name) for name, _ in found)
    return "\n".join(["CompiledModel("] + [f"  {name:<{width}}  {value}" for name, value in found] + [")"])


def html_table(manifest: Manifest, stats: dict[str, Any]) -> str:
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(name)}</th><td>{html.escape(value)}</td></tr>"
                   for name, value in rows(manifest, stats))
    return f"<table><caption>dycl CompiledModel</caption>{body}</table>"


__all__ = ["html_table", "rows", "text"]
