"""The host runtime is made of real modules, copied into every host.py (``hostgen.copies``)."""

from __future__ import annotations

import ast
import sys

import pytest
from dycl.hostgen.copies import copied

from dycl.backends.onnxruntime import OnnxRuntimeBackend
from dycl.backends.torch import TorchBackend
from dycl.backends.tvm import TvmBackend

#: what a host may import: the standard library, numpy and the backend's own runtime
ALLOWED = set(sys.stdlib_module_names) | {"numpy", "onnxruntime", "tvm"}


def _imported(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names


@pytest.mark.parametrize("backend", [OnnxRuntimeBackend, TvmBackend, TorchBackend])
def test_each_backend_runtime_is_a_copy_that_imports_neither_torch_nor_dycl(backend):
    runtime = backend.runtime
    assert "def load_executable(" in runtime and "def runtime_options(" in runtime
    assert _imported(runtime) <= ALLOWED, _imported(runtime) - ALLOWED
    assert not runtime.lstrip().startswith('"""')  # the module docstring stays in dycl


def test_a_copy_leaves_out_the_docstring_and_the_dycl_only_lines(tmp_path):
    module = tmp_path / "part.py"
    module.write_text('"""Docs\nover two lines."""\n\nimport os\nfrom dycl import x  # dycl only\n\n\n'
                      'def f():\n    return os.sep\n')
    assert copied(module) == "import os\n\n\ndef f():\n    return os.sep\n"


def test_the_onnxruntime_runtime_is_the_module_dycl_imports():
    from dycl.backends import ort_runtime

    options = ort_runtime.runtime_options(threads=1)
    assert options["threads"] == 1 and not options["shared_pool"]
    assert ort_runtime.session_options_for(options).intra_op_num_threads == 1
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        ort_runtime.runtime_options(threads=0)


def test_removed_lines_leave_at_most_two_blank_lines_and_strings_as_they_are(tmp_path):
    module = tmp_path / "part.py"
    module.write_text('import os\n\nA = 1  # dycl only\n\n\nB = 2  # dycl only\n\n\n\ndef f():\n'
                      '    return """x\n\n\n\ny"""\n')
    assert copied(module) == 'import os\n\n\ndef f():\n    return """x\n\n\n\ny"""\n'
