"""The public API: ``dycl.compile``, ``CompiledModel``, ``dycl.load``."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dycl.compiler import CompileResult, compile_model, load_host_module, manifest_bytes
from dycl.dynamic import DynamicSpec
from dycl.validate import validate
from hcfg.draw import layout_json, to_dot


def _to_numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value


def _to_torch(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        # a fresh runtime output is handed over as is; a view of a stored constant or of
        # an input (returned unchanged) is copied, so that the caller cannot alter them
        owned = value.flags.owndata and value.flags.writeable
        return torch.from_numpy(value if owned else np.array(value, copy=True))
    if isinstance(value, np.generic):
        return torch.from_numpy(np.asarray(value).copy())
    if isinstance(value, tuple):
        return tuple(_to_torch(v) for v in value)
    if isinstance(value, list):
        return [_to_torch(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_torch(v) for k, v in value.items()}
    return value


class CompiledModel:
    """A compiled model: call it like the original (torch tensors in, torch out).

    ``host_source`` is the generated host program, ``stats`` the sub-DNN and
    condition counts and the seconds spent per phase; ``save(dir)`` writes the
    standalone artifact.
    """

    def __init__(self, host_model: Any, host_source: str, result: CompileResult | None = None) -> None:
        self._host = host_model
        self.host_source = host_source
        self._result = result

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self._result.stats) if self._result else {}

    @property
    def graph(self):
        """The HCFG (``graph.to_dot()`` draws it)."""
        return self._result.graph if self._result else None

    @property
    def manifest(self) -> dict[str, Any]:
        return self._host.manifest

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        outputs = self._host(*[_to_numpy(a) for a in args], **{k: _to_numpy(v) for k, v in kwargs.items()})
        return _to_torch(outputs)

    def run_numpy(self, *args: Any, **kwargs: Any) -> Any:
        """Call the host directly with numpy arrays (what ``host.py`` does)."""
        return self._host(*args, **kwargs)

    def save(self, directory: str | Path) -> Path:
        if self._result is None:
            raise ValueError("this model was loaded from an artifact; copy its directory instead")
        if not self._result.backend.standalone:
            raise ValueError(f"backend {self._result.backend.name!r} runs only in-process and cannot be saved; "
                             "compile with backend='onnxruntime'")
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        for name, data in sorted(self._result.files.items()):
            (target / name).write_bytes(data)
        (target / "host.py").write_text(self.host_source)
        picture = layout_json(self._result.graph)
        (target / "hcfg.dot").write_text(to_dot(picture))
        (target / "hcfg.json").write_text(json.dumps(picture, indent=1) + "\n")
        (target / "manifest.json").write_bytes(manifest_bytes(self._result.manifest))
        return target


def compile(model: torch.nn.Module, example_input: Any, backend: str = "onnxruntime", optimize: bool = True,
            progress: bool | None = None, dynamic: DynamicSpec = True,
            **backend_options: Any) -> CompiledModel:  # noqa: A001 - the design's name
    """Compile ``model`` (whose ``forward`` may branch on data) for ``example_input``
    (a tensor or a tuple of positional arguments). Every branch is compiled now;
    nothing is compiled when the model is called.

    ``dynamic`` says which input dims may differ from the example's at call time
    (``dycl.dynamic``): by default the batch dim; ``{"x": {2: "h", 3: "w"}}`` adds
    named dims, ``"all"`` makes every dim symbolic, ``False`` compiles the
    example's exact shapes. One artifact serves every size.

    ``backend_options`` go to the backend: ``backend="tvm"`` takes ``tune_trials``
    (MetaSchedule trials per distinct kernel; records cached), ``target``,
    ``schedule``, ``jobs`` and ``specialize`` (see ``dycl.backends.tvm``)."""
    validate(model, example_input)
    was_training = model.training
    model.eval()
    try:
        result = compile_model(model, example_input, backend=backend, optimize=optimize, progress=progress,
                               backend_options=backend_options, dynamic=dynamic)
    finally:
        model.train(was_training)
    return from_result(result)


def from_result(result: CompileResult) -> CompiledModel:
    """The in-process model of a ``compile_model`` result."""
    chosen = result.backend
    host = load_host_module(result.host_source)
    by_file: dict[str, Any] = {}  # sub-DNNs that share a file share its executable, as in the saved host
    executables = {}
    for name, entry in result.manifest["sub_dnns"].items():
        if entry["file"] not in by_file:
            by_file[entry["file"]] = chosen.executable(result.files[entry["file"]], entry, result.modules[name])
        executables[name] = by_file[entry["file"]]
    constants = {key: value.numpy() for key, value in result.constants.items()}
    return CompiledModel(host.Model(executables, result.manifest, constants), result.host_source, result)


def load(directory: str | Path) -> CompiledModel:
    """Load a saved artifact (verifying its manifest and checksums)."""
    path = Path(directory)
    host_file = path / "host.py"
    if not host_file.is_file():
        raise FileNotFoundError(f"{path} has no host.py: not a dycl artifact directory")
    name = f"dycl_host_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, host_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return CompiledModel(module.load(path), host_file.read_text())
