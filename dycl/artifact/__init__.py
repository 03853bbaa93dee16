"""The saved artifact: its manifest, outputs table, README, and loading one safely.

The package's public names are those of ``store`` (check an artifact without running it, load
one, write one atomically), so ``dycl.artifact.verify(directory)`` reads as it always has.
"""

from dycl.artifact.store import (
    ArtifactError,
    Manifest,
    host_model,
    load_host,
    verified_artifact,
    verify,
    write_artifact,
)

__all__ = ["ArtifactError", "Manifest", "host_model", "load_host", "verified_artifact", "verify", "write_artifact"]
