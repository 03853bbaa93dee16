"""Saved artifacts: check one without running it, load one, write one atomically.

An artifact is code (``host.py``, and for TVM native libraries): loading one
means trusting it. What this module guarantees is integrity, not authenticity:

- ``verify(dir)`` reads only data files and runs nothing from the artifact; it
  applies the checks of ``hostgen.artifact_check`` (the same code the torch-free
  host runs in its own ``load``) and returns the ``Manifest``.
- ``load_host(dir)`` verifies first, then executes the *verified bytes* of
  ``host.py`` as a fresh module that is not registered in ``sys.modules`` (so any
  number of artifacts coexist), and builds the model from the verified files
  through the host's own ``from_verified`` (``host_model``, which ``dycl.compile``
  uses too).
- ``write_artifact(dir, files)`` writes into a new directory beside ``dir`` and
  swaps it into place, so that ``dir`` always holds the old model or the new one,
  never a mix or stale files; it refuses to replace a directory that is not a
  dycl artifact.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dycl.artifact import host_module
from dycl.hostgen.artifact_check import verified_artifact
from dycl.hostgen.manifest import DYCL_VERSION, MANIFEST_FILE, ArtifactError, Manifest


def verify(directory: str | Path) -> Manifest:
    """Check ``directory`` (schema, file names, checksums, no external data) without
    running anything in it; return its manifest. Raises ``ArtifactError`` (a
    ``ValueError``) or ``FileNotFoundError`` naming the file or field."""
    manifest, _ = verified_artifact(os.fspath(directory), DYCL_VERSION)
    return manifest


def load_host(directory: str | Path, **options: Any) -> tuple[Any, str]:
    """``(host model, host source)`` of a verified artifact; ``options`` go to the
    host's ``runtime_options`` (``threads``, ``providers``, ``session_options``, ``specialize``,
    ``shared_pool``)."""
    manifest, files = verified_artifact(os.fspath(directory), DYCL_VERSION)
    source = files[manifest.host.file].decode("utf-8")
    return host_model(source, manifest, files, name=f"dycl_artifact_{manifest.host.sha256[:16]}", **options), source


def host_model(source: str, manifest: Manifest, files: dict[str, bytes], name: str = "dycl_host",
               executable: Any = None, **options: Any) -> Any:
    """The model that the host ``source`` builds with its own loader
    (``from_verified``, what its ``load`` calls after verifying) from ``manifest``
    and the ``files`` it lists: ``dycl.load`` and ``dycl.compile`` build their
    models here, so both run what the saved ``host.py`` runs. ``executable``:
    see the host's ``from_verified``."""

    module = host_module.load_host_module(source, name=name)
    return module.from_verified(manifest, files, executable=executable, **options)


def write_artifact(target: str | Path, files: dict[str, bytes]) -> Path:
    """Write ``files`` as the directory ``target``, replacing a previous artifact
    there in one step."""
    target = Path(target)
    _check_replaceable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.dycl-new-", dir=target.parent))
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        staging.chmod(0o755)  # mkdtemp's 0o700 would hide the artifact from other users
        if target.exists():
            shutil.rmtree(_exchange(staging, target))
        else:
            staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _check_replaceable(target: Path) -> None:
    if not target.exists() and not target.is_symlink():
        return
    if target.is_symlink() or not target.is_dir():
        raise FileExistsError(f"{target} exists and is not a directory; refusing to replace it with an artifact")
    if not any(target.iterdir()):
        return
    try:
        manifest = json.loads((target / MANIFEST_FILE).read_text())
        is_artifact = isinstance(manifest, dict) and "dycl_version" in manifest
    except (OSError, ValueError, RecursionError):
        is_artifact = False
    if not is_artifact:
        raise FileExistsError(f"{target} exists and is not a dycl artifact (no {MANIFEST_FILE} written by dycl); "
                              "refusing to replace it: remove it or save somewhere else")


def _exchange(new: Path, old: Path) -> Path:
    """Put directory ``new`` at ``old`` and return where the previous ``old`` went:
    one atomic swap (Linux ``renameat2(RENAME_EXCHANGE)``); where that is
    unavailable, the old one is moved aside and the new one in (then a kill between
    the two renames leaves no directory at ``old``, never a mixed one)."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is not None:
        at_cwd, exchange = -100, 2
        if renameat2(at_cwd, os.fsencode(new), at_cwd, os.fsencode(old), exchange) == 0:
            return new
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL, errno.EPERM):
            raise OSError(code, os.strerror(code), str(old))
    aside = Path(tempfile.mkdtemp(prefix=f".{old.name}.dycl-old-", dir=old.parent))
    old.rename(aside / old.name)
    new.rename(old)
    return aside


__all__ = ["ArtifactError", "Manifest", "verify", "load_host", "host_model", "write_artifact"]
