"""How the TVM backend compiles: target, schedules, tuning budget, workers, caches."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_CPU = "x86-64-v2"
SCHEDULES = ("none", "dlight", "dycl")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def default_cache_dir() -> str:
    root = os.environ.get("DYCL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "dycl")
    return os.path.join(root, "tvm")


@dataclass(frozen=True)
class TvmOptions:
    """How the TVM backend compiles; every field has an environment variable."""

    target: str = DEFAULT_CPU  # an LLVM CPU name or a JSON target dict (DYCL_TVM_TARGET)
    schedule: str = "dycl"  # one of SCHEDULES (DYCL_TVM_SCHEDULE)
    tune_trials: int = 0  # MetaSchedule trials per distinct kernel; 0: no tuning (DYCL_TVM_TUNE_TRIALS)
    jobs: int = 0  # processes compiling sub-DNNs in parallel; 0: one per CPU (DYCL_TVM_JOBS)
    cache_dir: str = field(default_factory=default_cache_dir)  # (DYCL_CACHE/tvm)
    build_cache: bool = True  # reuse finished libraries from cache_dir (DYCL_TVM_BUILD_CACHE=0 turns off)
    # a sub-DNN with symbolic dims is also built for its example's shapes (DYCL_TVM_SPECIALIZE=0 turns off)
    specialize: bool = True

    @classmethod
    def from_env(cls, **overrides: Any) -> TvmOptions:
        options = cls(
            target=os.environ.get("DYCL_TVM_TARGET") or DEFAULT_CPU,
            schedule=os.environ.get("DYCL_TVM_SCHEDULE") or "dycl",
            tune_trials=_env_int("DYCL_TVM_TUNE_TRIALS", 0),
            jobs=_env_int("DYCL_TVM_JOBS", 0),
            build_cache=os.environ.get("DYCL_TVM_BUILD_CACHE", "1") != "0",
            specialize=os.environ.get("DYCL_TVM_SPECIALIZE", "1") != "0",
        )
        options = replace(options, **{k: v for k, v in overrides.items() if v is not None})
        if options.schedule not in SCHEDULES:
            raise ValueError(f"unknown TVM schedule {options.schedule!r}; choose one of {SCHEDULES}")
        return options

    def target_dict(self) -> dict[str, Any]:
        if self.target.lstrip().startswith("{"):
            return json.loads(self.target)
        return {"kind": "llvm", "mcpu": self.target}




def target_of(options: TvmOptions, cores: int | None = None):
    import tvm

    described = dict(options.target_dict())
    if cores:
        described.setdefault("num-cores", cores)
    return tvm.target.Target(described)



def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temporary, path)

