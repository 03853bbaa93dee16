"""Tuned schedules cached on disk: kernel keys and applying a cached trace."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from dycl.backends.tvm.options import TvmOptions


def kernel_key(func, options: TvmOptions) -> tuple[str, Any]:
    """The kernel as MetaSchedule sees it (an IRModule with ``main``) and a key that
    survives processes: its TVMScript text, the target and the TVM version."""
    import tvm

    normalized = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    text = normalized.script(show_meta=True) + json.dumps([options.target_dict(), tvm.__version__], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32], normalized


def static_kernel(func) -> bool:
    from tvm import tirx

    for param in func.params:
        shape = getattr(param, "shape", None)
        if shape is None or not all(isinstance(dim, tirx.IntImm) for dim in shape):
            return False
    return True


def tuning_dir(options: TvmOptions) -> Path:
    return Path(options.cache_dir) / "tuning"


def apply_tuned(mod, target, options: TvmOptions):
    """Replace every kernel with a cached tuned schedule by that schedule."""
    from tvm import s_tir, tirx

    directory = tuning_dir(options)
    for global_var, func in list(mod.functions_items()):
        if not isinstance(func, tirx.PrimFunc) or not static_kernel(func):
            continue
        key, normalized = kernel_key(func, options)
        path = directory / f"{key}.json"
        if not path.is_file():
            continue
        record = json.loads(path.read_text())
        if not record.get("trace"):
            continue  # tuning did not beat the default schedule
        sch = s_tir.Schedule(normalized)
        s_tir.schedule.Trace.apply_json_to_schedule(record["trace"], sch)
        scheduled = sch.mod["main"].with_attr("global_symbol", global_var.name_hint)
        mod[global_var] = scheduled.with_attr("tirx.is_scheduled", True)
    return mod



def plain(value: Any) -> Any:
    """A trace's JSON (TVM containers) as plain Python, for ``json.dumps``."""
    from tvm import tirx

    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    if isinstance(value, tirx.FloatImm):
        return float(value.value)
    if hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    return [plain(v) for v in value]

