"""Loading verifies before it executes: every refusal happens before any code of
the artifact runs (its host.py would write a marker file) and without opening
any file outside the artifact directory; errors name the file or manifest field."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path

import onnx
import pytest
from onnx.external_data_helper import convert_model_to_external_data

import dycl
from dycl.artifact import ArtifactError, verify
from tests.artifact.documents import set_field
from tests.artifact.models import warm_start
from tests.artifact.watch import files_opened


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    model = warm_start()
    compiled = dycl.compile(model, __import__("torch").randn(1, 4))
    assert compiled.stats["constants"] == 1
    return compiled.save(tmp_path_factory.mktemp("pristine") / "net")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest(artifact: Path) -> dict:
    return json.loads((artifact / "manifest.json").read_text())


def _write_manifest(artifact: Path, manifest: dict) -> None:
    (artifact / "manifest.json").write_text(json.dumps(manifest))


def _armed_copy(pristine: Path, root: Path) -> tuple[Path, Path]:
    """A copy whose host.py writes a marker when executed, with its checksum updated:
    only the defect each test adds may stop it from running."""
    artifact = root / "artifact"
    shutil.copytree(pristine, artifact)
    marker = root / "marker"
    host = f"open({str(marker)!r}, 'w').write('host.py ran')\n".encode() + (artifact / "host.py").read_bytes()
    (artifact / "host.py").write_bytes(host)
    manifest = _manifest(artifact)
    manifest["host"]["sha256"] = _sha(host)
    _write_manifest(artifact, manifest)
    return artifact, marker


def _outside_copy(artifact: Path, root: Path) -> Path:
    """A valid sub-DNN file outside the artifact, with the checksum the manifest records."""
    outside = root / "outside.onnx"
    outside.write_bytes((artifact / "subdnn_1.onnx").read_bytes())
    return outside


def _edit(change):
    def apply(artifact: Path, root: Path) -> str | None:
        manifest = _manifest(artifact)
        secret = change(manifest, artifact, root)
        _write_manifest(artifact, manifest)
        return secret
    return apply


def _host_edited(artifact, root):
    with open(artifact / "host.py", "a") as file:
        file.write("\nSUB_DNNS.clear()\n")


def _parent_path(manifest, artifact, root):
    outside = _outside_copy(artifact, root)
    manifest["sub_dnns"]["subdnn_1"]["file"] = "../outside.onnx"
    return _sha(outside.read_bytes())


def _absolute_path(manifest, artifact, root):
    outside = _outside_copy(artifact, root)
    manifest["sub_dnns"]["subdnn_1"]["file"] = str(outside)
    return _sha(outside.read_bytes())


def _separator(manifest, artifact, root):
    (artifact / "sub").mkdir()
    shutil.copy(artifact / "subdnn_1.onnx", artifact / "sub" / "subdnn_1.onnx")
    manifest["sub_dnns"]["subdnn_1"]["file"] = "sub/subdnn_1.onnx"


def _symlink(artifact, root):
    outside = _outside_copy(artifact, root)
    (artifact / "subdnn_1.onnx").unlink()
    (artifact / "subdnn_1.onnx").symlink_to(outside)
    return _sha(outside.read_bytes())


def _external_data(artifact, root):
    model = onnx.load(artifact / "subdnn_1.onnx")
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    onnx.save_model(model, artifact / "subdnn_1.onnx")
    assert (artifact / "weights.bin").exists()
    manifest = _manifest(artifact)
    for entry in manifest["sub_dnns"].values():
        if entry["file"] == "subdnn_1.onnx":
            entry["sha256"] = _sha((artifact / "subdnn_1.onnx").read_bytes())
    _write_manifest(artifact, manifest)


def _text(text):
    def apply(artifact, root):
        (artifact / "manifest.json").write_text(text)
    return apply


def _constants(field, value):
    def change(manifest, artifact, root):
        array = next(iter(manifest["constants"]["arrays"].values()))
        array[field] = value(array[field])
    return _edit(change)


def _set(path, value):
    def change(manifest, artifact, root):
        set_field(manifest, path, value)
    return _edit(change)


REFUSALS = {
    "host.py edited, checksum not": (_host_edited, ArtifactError, "checksum mismatch for host.py"),
    "a parent-directory path": (_edit(_parent_path), ArtifactError, "sub_dnns.subdnn_1.file: '../outside.onnx' is "
                                                                    "not a plain file name"),
    "an absolute path": (_edit(_absolute_path), ArtifactError, "sub_dnns.subdnn_1.file: .* is not a plain file name"),
    "a path with a separator": (_edit(_separator), ArtifactError, "'sub/subdnn_1.onnx' is not a plain file name"),
    "a symbolic link": (_symlink, ArtifactError, "subdnn_1.onnx \\(sub_dnns.subdnn_1.file\\) is a symbolic link"),
    "ONNX external data": (_external_data, ArtifactError, "subdnn_1.onnx \\(sub_dnns.subdnn_1\\) refers to external"),
    "truncated JSON": (_text('{"dycl_version": "0.1.0", '), ArtifactError, "manifest.json is not valid JSON"),
    "deeply nested JSON": (_text("[" * 200_000 + "]" * 200_000), ArtifactError, "not valid JSON \\(RecursionError"),
    "a list at the top": (_text("[]"), ArtifactError, "\\(top level\\): expected an object, got list"),
    "a missing field": (_set(("sub_dnns", "subdnn_1", "sha256"), KeyError), ArtifactError,
                        "sub_dnns.subdnn_1: missing field 'sha256'"),
    "a wrong type": (_set(("inputs",), {"x": 1}), ArtifactError, "inputs: expected a list, got dict"),
    "a bad checksum field": (_set(("sub_dnns", "subdnn_0", "sha256"), "../../etc/passwd"), ArtifactError,
                             "sub_dnns.subdnn_0.sha256: expected 64 lowercase hex digits"),
    "a port dtype outside the whitelist": (_set(("inputs", 0, "dtype"), "object"), ArtifactError,
                                           "inputs\\[0\\].dtype: expected one of"),
    "another host file": (_set(("host", "file"), "manifest.json"), ArtifactError, "host.file: expected 'host.py'"),
    "a constants dtype changed": (_constants("dtype", lambda _: "int32"), ArtifactError,
                                  "constants.arrays differs from the table inside the constants file"),
    "a constants offset changed": (_constants("offset", lambda offset: offset + 64), ArtifactError,
                                   "constants.arrays differs"),
    "a constants shape changed": (_constants("shape", lambda shape: [4, 4]), ArtifactError, "constants.arrays differs"),
    "a constants dtype outside the whitelist": (_constants("dtype", lambda _: "object"), ArtifactError,
                                                "constants.arrays.*dtype: expected one of"),
    "a missing file": (lambda artifact, root: (artifact / "subdnn_1.onnx").unlink(), FileNotFoundError,
                       "subdnn_1.onnx is listed in the manifest \\(sub_dnns.subdnn_1.file\\) but missing"),
    "a newer dycl version": (_set(("dycl_version",), "9.9.9"), ArtifactError, "written by dycl 9.9.9"),
}


def _host_module(artifact: Path):
    spec = importlib.util.spec_from_file_location("pristine_host_for_tests", artifact / "host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_each_refusal_runs_nothing_and_reads_nothing_outside(case, pristine, tmp_path):
    mutate, error, message = REFUSALS[case]
    artifact, marker = _armed_copy(pristine, tmp_path)
    secret = mutate(artifact, tmp_path)
    host = _host_module(pristine)  # the torch-free host's own load() does the same checks
    for load in (dycl.load, verify, host.load):
        # the host defines its own ArtifactError (it cannot import dycl's): a ValueError too
        expected = error if load is not host.load or error is FileNotFoundError else ValueError
        with files_opened() as opened, pytest.raises(expected, match=message) as info:
            load(artifact)
        outside = [path for path in opened if Path(path).is_relative_to(tmp_path)
                   and not Path(path).is_relative_to(artifact)]
        assert outside == [], f"{load.__module__}.{load.__name__} opened {outside}"
        assert not marker.exists(), f"{load.__module__}.{load.__name__} ran the artifact's code"
        if secret is not None:
            assert secret not in str(info.value)


def test_armed_artifact_does_run_its_code_when_intact(pristine, tmp_path):
    """The marker the refusal tests rely on does appear when nothing is wrong."""
    artifact, marker = _armed_copy(pristine, tmp_path)
    assert verify(artifact)["backend"] == "onnxruntime" and not marker.exists()
    dycl.load(artifact)
    assert marker.read_text() == "host.py ran"


def test_errors_are_value_errors_naming_the_field(pristine, tmp_path):
    artifact, _ = _armed_copy(pristine, tmp_path)
    manifest = _manifest(artifact)
    manifest["sub_dnns"]["subdnn_1"]["outputs"][0]["shape"] = [1, -3]
    _write_manifest(artifact, manifest)
    with pytest.raises(ValueError, match=r"sub_dnns.subdnn_1.outputs\[0\].shape\[1\]: expected a non-negative"):
        dycl.load(artifact)
    assert os.path.exists(artifact / "host.py")
