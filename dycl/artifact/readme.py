"""The files that explain an artifact to whoever receives it: ``README.md`` and
``requirements.txt``, written from the manifest alone.

Assumes a ``Manifest`` as ``dycl.artifact.manifest_build`` writes it (outputs included). The
requirements are compatible ranges around the versions the artifact was built
and tested with (which the README names): the host needs numpy and the backend
runtime, never torch or dycl.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata

from dycl.hostgen.manifest import Manifest


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def requirements(manifest: Manifest) -> dict[str, str]:
    """``{requirement line: tested version}`` of the packages the host imports."""
    numpy = _version("numpy")
    lines = {f"numpy>={numpy.split('.')[0]}.0" if numpy != "unknown" else "numpy": numpy}
    if manifest.backend == "onnxruntime":
        ort = _version("onnxruntime")
        major, minor = (ort.split(".") + ["0"])[:2]
        # the model files use this runtime's ONNX IR version: older runtimes refuse them
        lines[f"onnxruntime>={major}.{minor},<{int(major) + 1}" if ort != "unknown" else "onnxruntime"] = ort
    elif manifest.backend == "tvm":
        tvm = _version("apache-tvm")
        lines[f"apache-tvm=={tvm}" if tvm != "unknown" else "apache-tvm"] = tvm  # native libraries: same build
    return lines


def requirements_txt(manifest: Manifest) -> str:
    tested = ", ".join(f"{line.split('>')[0].split('=')[0]}=={version}"
                       for line, version in requirements(manifest).items())
    lines = "\n".join(requirements(manifest))
    return f"# runtime packages of this dycl artifact (tested with {tested})\n{lines}\n"


def _shape(shape: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(dim) for dim in shape) + "]"


def readme(manifest: Manifest) -> str:
    """A short README: what the artifact is, its inputs and outputs, how to run it."""
    dims = ", ".join(f"`{name}`" for name in sorted(manifest.dynamic_dims)) or "none"
    tested = ", ".join(f"{line} (tested: {version})" for line, version in requirements(manifest).items())
    return _README.format(model=manifest.model, dycl_version=manifest.dycl_version, backend=manifest.backend,
                          sub_dnns=len(manifest.sub_dnns), inputs=_inputs_table(manifest),
                          outputs=_outputs_table(manifest), dims=dims, tested=tested,
                          threads=_ORT_THREADS if manifest.backend == "onnxruntime" else _TVM_THREADS)


def _inputs_table(manifest: Manifest) -> str:
    return "\n".join(f"| `{port.name}` | {port.dtype} | {_shape(port.shape)} |"
                     for port in manifest.inputs) or "| (none) | | |"


def _outputs_table(manifest: Manifest) -> str:
    return "\n".join(
        f"| `{spec.name}` | {spec.dtype or spec.kind} | "
        f"{_shape(spec.shape) if spec.shape is not None else _example(spec.example_shape)} |"
        for spec in manifest.outputs) or "| (unknown) | | |"


def _example(shape: tuple[int, ...] | None) -> str:
    return f"{_shape(shape)} at the example" if shape is not None else "-"


# how a loaded model uses threads (the README's "Threads" section)
_ORT_THREADS = ("`load(..., threads=N)` sets the intra-op threads of each ONNX Runtime session (default: every "
                "CPU); `providers=` and `session_options=` are passed to ONNX Runtime; `shared_pool=True` opts in "
                "to one process-wide ONNX Runtime thread pool (faster, but then every ONNX Runtime session in "
                "the process must use `use_per_session_threads=False`). A combination of input sizes seen twice "
                "gets a session specialized to it (a few ms, once); `specialize=False` (or "
                "`DYCL_ORT_SPECIALIZE=off`) keeps every call on the sessions at symbolic sizes.")
_TVM_THREADS = "TVM has one process-wide thread pool: set `TVM_NUM_THREADS` before the first load."

_README = """# {model} — a dycl artifact

The model `{model}` compiled by dycl {dycl_version} for **{backend}**:
{sub_dnns} control-flow-free sub-DNNs and `host.py`, a generated Python program that
runs them in the order the model's `forward()` would. It needs Python, numpy and the backend runtime
only — no PyTorch, no dycl.

**An artifact is code**: `host.py` (and, for TVM, the native libraries) run when it is loaded. Load
only artifacts you trust. `load` checks every file against `manifest.json` (sha256) first.

## Inputs

| name | dtype | shape |
|---|---|---|
{inputs}

Symbolic dims ({dims}) may take any size; other dims are fixed.

## Outputs

| name | dtype or kind | shape |
|---|---|---|
{outputs}

## Requirements

`pip install -r requirements.txt`: {tested}.

## Use

```python
import importlib.util
spec = importlib.util.spec_from_file_location("my_model_host", "path/to/this/dir/host.py")
host = importlib.util.module_from_spec(spec); spec.loader.exec_module(host)
model = host.load("path/to/this/dir")
outputs = model(*numpy_arrays)        # or dycl.load("path/to/this/dir") where dycl is installed
```

From a shell: `python host.py INPUT.npy [...] --out OUT.npz` (`python host.py --help`).

## Threads

A loaded model may be called from many threads at once. {threads}

## Files

`manifest.json` (inputs, outputs, every file's sha256), `host.py`, one file per sub-DNN (ONNX files
name their HCFG node and source lines in their metadata), `hcfg.dot`/`hcfg.json` (the graph).
"""


__all__ = ["readme", "requirements", "requirements_txt"]
