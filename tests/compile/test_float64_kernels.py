"""``onnx_float64_kernels.MISSING_FLOAT64`` is ONNX Runtime's own gap: each operator there fails to
load at float64 and loads at float32 (so dycl refuses no float64 model ORT could run, and a new ORT
with the kernel shows up here)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from dycl.backends.onnx_float64_kernels import MISSING_FLOAT64

_EXTRA = {  # operator -> (attributes, extra inputs as (name, numpy array))
    "AveragePool": ({"kernel_shape": [2]}, []),
    "InstanceNormalization": ({}, [("scale", [1.0]), ("bias", [0.0])]),
    "Resize": ({"mode": "linear"}, [("roi", None), ("scales", [1.0, 1.0, 2.0])]),
}


def _model(op: str, elem: int) -> bytes:
    attributes, extra = _EXTRA.get(op, ({}, []))
    dtype = np.float64 if elem == TensorProto.DOUBLE else np.float32
    initializers, names = [], ["x"]
    for name, values in extra:
        if values is None:
            names.append("")
            continue
        array = np.array(values, dtype=np.float32 if name == "scales" else dtype)
        initializers.append(onnx.numpy_helper.from_array(array, name))
        names.append(name)
    node = helper.make_node(op, names, ["y"], **attributes)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, [1, 1, 4])],
                              [helper.make_tensor_value_info("y", elem, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("op", sorted(MISSING_FLOAT64))
def test_onnx_runtime_lacks_exactly_the_float64_kernel(op):
    session = ort.InferenceSession(_model(op, TensorProto.FLOAT), providers=["CPUExecutionProvider"])
    out = session.run(None, {"x": np.array([[[0.5, -1.0, 2.0, 0.25]]], dtype=np.float32)})[0]
    assert out.dtype == np.float32 and out.size > 0
    # (ORT runs HardSwish as HardSigmoid times x: the kernel it names is HardSigmoid's)
    named = "HardSigmoid" if op == "HardSwish" else op
    with pytest.raises(Exception, match=f"NOT_IMPLEMENTED : Could not find an implementation for {named}\\("):
        ort.InferenceSession(_model(op, TensorProto.DOUBLE), providers=["CPUExecutionProvider"])
