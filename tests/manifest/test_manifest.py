"""The typed manifest: round trips, validation that names the field, schema
versions, and one loader shared by dycl and the generated host."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from dycl.hcfg.levers import ALL_ON, Levers
from dycl.hostgen import artifact_check, manifest
from dycl.hostgen.manifest import (
    SCHEMA_VERSION,
    ArtifactError,
    CallForm,
    ConstantArray,
    Constants,
    FileEntry,
    Manifest,
    Output,
    Port,
    SubDNNEntry,
)
from dycl.hostgen.template import copied_source

import dycl
import dycl.artifact
import dycl.artifact.host_module
import dycl.compiler
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.artifact.documents import set_field

ATOL = 1e-5
SHA = "ab" * 32


class Halting(nn.Module):
    """An adaptive-depth block as people write it: a running state initialised
    from a constant, a halting score checked after each step, an early return."""

    def __init__(self) -> None:
        super().__init__()
        self.step = nn.Linear(6, 6)
        self.halt = nn.Linear(6, 1)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        bias = torch.full((1, 2), 0.25)  # a constant the exits read: the host stores it (constants.bin)
        state = x
        steps = 0
        for _ in range(3):
            state = torch.tanh(self.step(state))
            steps += 1
            if torch.sigmoid(self.halt(state)).mean() > 0.5:
                return self.head(state) + bias, steps
        return self.head(state) * 2.0, steps


def _halting() -> Halting:
    torch.manual_seed(3)
    return Halting().eval()


def _inputs(count: int = 30) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(4)
    return [torch.randn(1, 6, generator=generator) * (0.3 + i % 5) for i in range(count)]


@pytest.fixture(scope="module")
def compiled():
    return dycl.compile(_halting(), _inputs(1)[0])


@pytest.fixture(scope="module")
def artifact(compiled, tmp_path_factory) -> Path:
    return compiled.save(tmp_path_factory.mktemp("manifest") / "net")


def _full() -> Manifest:
    """A manifest with every field set."""
    port = Port("x", "tensor", "float32", ("batch", 6))
    return Manifest(
        dycl_version="0.1.0", backend="onnxruntime", model="Net.forward", inputs=(port,),
        host=FileEntry("host.py", SHA),
        sub_dnns={"subdnn_0": SubDNNEntry("subdnn_0.onnx", SHA, (port,), (Port("n", "int", "int64", ()),)),
                  "subdnn_0_1": SubDNNEntry("subdnn_0.onnx", SHA, (port,), (Port("y", "tensor", "float32", (2,)),),
                                            spin=True)},
        outputs=(Output("output_0", "tensor", "float32", (1, 2)), Output("output_1", "int")),
        call=CallForm((("x", "POSITIONAL_OR_KEYWORD", False),), (("x", "x", None),)),
        dynamic_dims={"batch": (("x", 0),)},
        constants=Constants("constants.bin", SHA, {"h@0": ConstantArray(0, "float32", (1, 6))}),
        output={"type": "builtins.tuple", "returned_as": "tuple", "items": ["leaf", "leaf"]},
    )


def test_round_trip_of_every_field():
    original = _full()
    document = json.loads(original.to_bytes())
    assert document["schema"] == SCHEMA_VERSION and document["dynamic_dims"] == {"batch": [["x", 0]]}
    assert Manifest.from_json(document) == original
    assert Manifest.from_json(document).to_bytes() == original.to_bytes()
    assert original["outputs"][1] == {"name": "output_1", "kind": "int"} and "constants" in original
    plain = Manifest.from_json({key: value for key, value in document.items()
                                if key not in ("constants", "call", "output", "outputs", "dynamic_dims")})
    assert plain.constants is None and plain.outputs == () and "constants" not in plain.to_json()


def test_round_trip_of_a_compiled_manifest(compiled, artifact):
    written = compiled.manifest
    assert isinstance(written, Manifest) and written.constants is not None
    assert Manifest.from_json(json.loads(written.to_bytes())) == written
    assert dycl.artifact.verify(artifact) == written
    assert (artifact / "manifest.json").read_bytes() == written.to_bytes()


def _document() -> dict:
    return json.loads(_full().to_bytes())


def _set(path, value):
    def apply(document):
        set_field(document, path, value)
    return apply


# every field of the schema, broken: the error names the field and says what was expected
BROKEN = {
    "dycl_version": (_set(("dycl_version",), 1), r"dycl_version: expected a string, got 1"),
    "backend": (_set(("backend",), None), r"backend: expected a string, got NoneType"),
    "model": (_set(("model",), KeyError), r"\(top level\): missing field 'model'"),
    "unexpected": (_set(("tuned",), True), r"\(top level\): unexpected field 'tuned'"),
    "inputs": (_set(("inputs",), {}), r"inputs: expected a list, got dict"),
    "input name": (_set(("inputs", 0, "name"), 3), r"inputs\[0\].name: expected a string"),
    "input kind": (_set(("inputs", 0, "kind"), KeyError), r"inputs\[0\]: missing field 'kind'"),
    "input dtype": (_set(("inputs", 0, "dtype"), "object"), r"inputs\[0\].dtype: expected one of \["),
    "input dtype list": (_set(("inputs", 0, "dtype"), ["float32"]), r"inputs\[0\].dtype: expected one of .*got list"),
    "input dim": (_set(("inputs", 0, "shape"), ["batch", -1]), r"inputs\[0\].shape\[1\]: expected a non-negative"),
    "input dim bool": (_set(("inputs", 0, "shape"), [True]), r"inputs\[0\].shape\[0\]: expected a non-negative"),
    "port extra": (_set(("inputs", 0, "layout"), "NCHW"), r"inputs\[0\]: unexpected field 'layout'"),
    "host": (_set(("host",), "host.py"), r"host: expected an object, got 'host.py'"),
    "host file": (_set(("host", "file"), "other.py"), r"host.file: expected 'host.py', got 'other.py'"),
    "host sha": (_set(("host", "sha256"), "AB" * 32), r"host.sha256: expected 64 lowercase hex digits"),
    "sub_dnns": (_set(("sub_dnns",), []), r"sub_dnns: expected an object, got list"),
    "sub-DNN file": (_set(("sub_dnns", "subdnn_0", "file"), ["a"]), r"sub_dnns.subdnn_0.file: expected a string"),
    "sub-DNN sha": (_set(("sub_dnns", "subdnn_0", "sha256"), KeyError),
                    r"sub_dnns.subdnn_0: missing field 'sha256'"),
    "sub-DNN output": (_set(("sub_dnns", "subdnn_0_1", "outputs", 0, "shape"), "2"),
                       r"sub_dnns.subdnn_0_1.outputs\[0\].shape: expected a list, got '2'"),
    "sub-DNN spin": (_set(("sub_dnns", "subdnn_0_1", "spin"), False),
                     r"sub_dnns.subdnn_0_1.spin: expected true, got False"),
    "outputs": (_set(("outputs",), {}), r"outputs: expected a list, got dict"),
    "output dtype": (_set(("outputs", 0, "dtype"), "str"), r"outputs\[0\].dtype: expected one of"),
    "output shape": (_set(("outputs", 0, "example_shape"), ["n"]),
                     r"outputs\[0\].example_shape\[0\]: expected a non-negative integer, got 'n'"),
    "call": (_set(("call", "variadic"), KeyError), r"call: missing field 'variadic'"),
    "dynamic_dims": (_set(("dynamic_dims", "batch"), [["x"]]),
                     r"dynamic_dims.batch\[0\]: expected \[input name, axis\]"),
    "dynamic dim axis": (_set(("dynamic_dims", "batch"), [["x", -1]]),
                         r"dynamic_dims.batch\[0\]\[1\]: expected a non-negative integer"),
    "constants": (_set(("constants", "arrays"), KeyError), r"constants: missing field 'arrays'"),
    "constant offset": (_set(("constants", "arrays", "h@0", "offset"), 1.5),
                        r"constants.arrays.h@0.offset: expected a non-negative integer, got 1.5"),
    "constant shape": (_set(("constants", "arrays", "h@0", "shape"), ["batch"]),
                       r"constants.arrays.h@0.shape\[0\]: expected a non-negative integer, got 'batch'"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_validation_error_names_the_field(case):
    document = _document()
    change, message = BROKEN[case]
    change(document)
    with pytest.raises(ArtifactError, match=f"^manifest.json: {message}"):
        Manifest.from_json(document)


def test_an_older_schema_is_refused_before_any_other_field():
    older = _document()
    del older["schema"]  # what dycl wrote before the manifest had a version
    older["sub_dnns"] = "not read"
    with pytest.raises(ArtifactError, match=r"schema: missing: the artifact was written by an older dycl \(0.1.0\)"
                                            r".*recompile the model"):
        Manifest.from_json(older)
    for version in (1, SCHEMA_VERSION + 1, "2"):
        document = _document()
        document["schema"] = version
        with pytest.raises(ArtifactError, match=f"schema: expected manifest schema {SCHEMA_VERSION} "
                                                r"\(recompile the model with this dycl\)"):
            Manifest.from_json(document)


def test_an_artifact_of_an_older_schema_is_refused_by_every_loader(artifact, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(artifact, old)
    document = json.loads((old / "manifest.json").read_text())
    del document["schema"]
    (old / "manifest.json").write_text(json.dumps(document))
    host = _import_host(artifact)
    for load in (dycl.load, dycl.artifact.verify, host.load):
        with pytest.raises(ValueError, match="schema: missing: the artifact was written by an older dycl"):
            load(old)


def _import_host(artifact: Path):
    spec = importlib.util.spec_from_file_location("manifest_test_host", artifact / "host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_host_holds_dycls_manifest_and_checks_verbatim(artifact):
    source = (artifact / "host.py").read_text()
    assert copied_source("manifest.py") in source and copied_source("artifact_check.py") in source
    assert Path(manifest.__file__).read_text() == copied_source("manifest.py")  # nothing left out of it
    assert re.search(r"^\s*(import|from) dycl", source, re.MULTILINE) is None and "# dycl only" not in source
    assert dycl.artifact.verified_artifact is artifact_check.verified_artifact
    assert source.count("def verified_artifact(") == 1


def test_dycl_load_compile_and_host_py_build_the_model_with_the_hosts_own_loader(artifact, monkeypatch):
    """``from_verified`` of the host module is what makes the model, in-process
    and from a saved artifact; the standalone host.py reads the same manifest."""
    built = []
    real = dycl.artifact.host_module.load_host_module

    def recording(source, name="dycl_host"):
        module = real(source, name)
        loader = module.from_verified

        def from_verified(manifest, files, **options):
            model = loader(manifest, files, **options)
            built.append((module, model))
            return model

        module.from_verified = from_verified
        return module

    monkeypatch.setattr(dycl.artifact.host_module, "load_host_module", recording)
    loaded = dycl.load(artifact)
    fresh = dycl.compile(_halting(), _inputs(1)[0])
    assert [model for _, model in built] == [loaded._host, fresh._host]
    assert all(type(model) is module.Model for module, model in built)
    assert loaded.manifest == dycl.artifact.verify(artifact)
    standalone = _import_host(artifact).load(artifact)
    assert standalone.manifest.to_json() == loaded.manifest.to_json()
    assert type(standalone.manifest).__name__ == "Manifest" and type(standalone.manifest) is not Manifest


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_models_built_by_the_shared_loader_equal_eager_on_every_path(backend, compiled, artifact):
    model, inputs = _halting(), _inputs()
    candidate = compiled if backend == "onnxruntime" else dycl.compile(model, inputs[0], backend="torch")
    assert assert_equivalent(model, candidate, inputs, min_paths=3, atol=ATOL) == 4
    if backend == "onnxruntime":
        assert assert_equivalent(model, dycl.load(artifact), inputs, min_paths=3, atol=ATOL) == 4
        report = run_host_without_torch(artifact, model, inputs, ATOL)
        assert report["checked"] == len(inputs) and report["problems"] == []


def test_stored_constants_come_back_read_only(compiled):
    (key,) = compiled.manifest.constants.arrays
    array = compiled._host.constants[key]
    assert not array.flags.writeable
    assert array.shape == compiled.manifest.constants.arrays[key].shape == (1, 2)


def test_one_options_object_for_the_optimisations():
    assert Levers.of(True) is ALL_ON and Levers.of(False) == Levers(optimize_graph=False)
    custom = Levers(reuse_identical=False)
    assert Levers.of(custom) is custom
    with pytest.raises(TypeError, match="optimize must be True, False or a dycl.hcfg.levers.Levers, got str"):
        Levers.of("yes")
    model, inputs = _halting(), _inputs()
    plain = dycl.compile(model, inputs[0], optimize=False)
    assert plain.stats["constants"] == 0 and plain.manifest.constants is None
    assert assert_equivalent(model, plain, inputs, min_paths=3, atol=ATOL) == 4


def test_a_manifest_reads_its_json_fields_by_name(compiled):
    document = compiled.manifest.to_json()
    assert compiled.manifest["inputs"] == document["inputs"] == [
        {"name": "x", "kind": "tensor", "dtype": "float32", "shape": ["batch", 6]}]
    compiled.manifest["sub_dnns"].clear()  # a copy: the manifest itself does not change
    assert compiled.manifest["sub_dnns"] == document["sub_dnns"] != {}
    with pytest.raises(KeyError):
        compiled.manifest["nothing"]
