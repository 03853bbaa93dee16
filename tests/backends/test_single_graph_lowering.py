"""``dycl.backends.single_graph.lower`` on an HCFG built by hand, with hand-made ONNX sub-DNNs:
a join whose sides leave different tensors and counters, an exit tested on ``u.item() >= 0.7``
(compared exactly as Python compares the float32's ``.item()``), and what it refuses."""

from __future__ import annotations

import libcst as cst
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from dycl.hcfg.graph import HCFG, Cond, HostOp, Return, SubDNN
from dycl.hcfg.ports import Layout, Port, Variant
from onnx import TensorProto, helper

from dycl.backends.base import CompiledVariant
from dycl.backends.single_graph import NotLowerable, lower

LEAF = Layout(None, ("tensor",))
X = Port("x", "tensor", "float32", ("batch", 1))


def _statement(source: str) -> cst.SimpleStatementLine:
    return cst.parse_statement(source)


def _if(test: str) -> tuple[cst.If, cst.BaseExpression]:
    statement = cst.parse_statement(f"if {test}:\n    pass\n")
    return statement, statement.test


def _onnx(name: str, inputs: list[str], outputs: list[tuple[str, int]], nodes: list) -> bytes:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(i, TensorProto.FLOAT, None) for i in inputs],
                              [helper.make_tensor_value_info(o, elem, None) for o, elem in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _sub(index: int, source: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
         onnx: bytes, out_kinds: tuple[tuple[str, str], ...]) -> tuple[SubDNN, Variant, CompiledVariant]:
    sub = SubDNN(index, (_statement(source),), inputs, outputs)
    ports_in = tuple(Port(name, "tensor", "float32", ("batch", 1)) for name in inputs)
    ports_out = tuple(Port(f"{name}:out", kind, dtype, ()) for name, (kind, dtype) in zip(outputs, out_kinds))
    variant = Variant(sub, (), ports_in, ports_out, ((),), (LEAF,) * len(inputs), (LEAF,) * len(outputs))
    return sub, variant, CompiledVariant(f"{sub.name}.onnx", onnx)


def _parts():
    """y, t = relu(x), sum(x) > 0; n = 0; if t: y = 2 * y; n += 1; u = mean(y);
    if u.item() >= 0.7: return y, n; return [y], n + 10"""
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    first = _sub(0, "y, t = f(x)", ("x",), ("y", "t"), _onnx("first", ["x"], [("y:out", TensorProto.FLOAT),
                                                                                ("t:out", TensorProto.BOOL)], [
        helper.make_node("Relu", ["x"], ["y:out"]),
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Constant", [], ["zero"], value=zero),
        helper.make_node("Greater", ["s", "zero"], ["t:out"])]), (("tensor", "float32"), ("tensor", "bool")))
    double = _sub(1, "y = 2 * y", ("y",), ("y",), _onnx("double", ["y"], [("y:out", TensorProto.FLOAT)], [
        helper.make_node("Constant", [], ["two"], value=two),
        helper.make_node("Mul", ["y", "two"], ["y:out"])]), (("tensor", "float32"),))
    mean = _sub(2, "u = y.mean()", ("y",), ("u",), _onnx("mean", ["y"], [("u:out", TensorProto.FLOAT)], [
        helper.make_node("ReduceMean", ["y"], ["u:out"], keepdims=0)]), (("tensor", "float32"),))
    return first, double, mean


def _graph(first, double, mean, exit_test: str = "u.item() >= 0.7", late: str = "n + 10") -> HCFG:
    join, join_test = _if("t")
    leave, leave_test = _if(exit_test)
    ret = _statement("return y, n")
    ret_list = _statement(f"return [y], {late}")
    body = (first[0], HostOp(_statement("n = 0")),
            Cond(0, join, join_test, (double[0], HostOp(_statement("n += 1"))), ()),
            mean[0],
            Cond(1, leave, leave_test, (Return(ret, ret.body[0].value),), ()),
            Return(ret_list, ret_list.body[0].value))
    return HCFG("forward", ("x",), body)


def _run(graph: HCFG, parts) -> tuple:
    variants = [part[1] for part in parts]
    compiled = {part[1].name: part[2] for part in parts}
    lowered = lower(graph, [X], variants, compiled, lambda n: [f"out_{i}" for i in range(n)] + ["path"])
    session = ort.InferenceSession(lowered.model, providers=["CPUExecutionProvider"])
    return lowered, session


def _value(tree, outputs):
    kind = tree[0]
    if kind == "slot":
        value = outputs[tree[1]]
        return value.item() if tree[2] is not None else value
    if kind == "static":
        return tree[1]
    items = [_value(child, outputs) for child in tree[1]]
    return tuple(items) if kind == "tuple" else items


def _eager(x: np.ndarray):
    y, n = np.maximum(x, 0), 0
    if x.sum() > 0:
        y, n = 2 * y, n + 1
    if y.mean(dtype=np.float32).item() >= 0.7:
        return y, n
    return [y], n + 10


def test_a_join_and_an_exit_lower_to_if_nodes_equal_to_the_host_on_every_path():
    parts = _parts()
    lowered, session = _run(_graph(*parts), parts)
    assert lowered.stats["paths"] == 2 and lowered.stats["inlined"] == 3
    taken = set()
    # float32(0.7) < 0.7: y = 2 * 0.35f is float32(0.7), below the double 0.7 that Python compares
    # its .item() with, so it does not exit (compared as float32 with float32(0.7), it would)
    cases = [np.array([[v]], np.float32) for v in (-1.0, -0.2, 0.1, 0.3, 0.35, 0.36, 1.0, 5.0)]
    cases += [np.array([[0.9], [-0.5]], np.float32), np.array([[2.0], [-3.0]], np.float32)]
    for x in cases:
        *outputs, path = session.run(None, {"x": x})
        node, tree = lowered.paths[int(path)]
        got = _value(tree, outputs)
        expected = _eager(x)
        taken.add((int(path), expected[1]))
        if x.shape == (1, 1) and x[0, 0] == np.float32(0.35):
            assert int(path) == 1 and isinstance(got[0], list), got
        assert type(got) is type(expected) and got[1] == expected[1] and type(got[1]) is int, (x, got, expected)
        assert np.array_equal(np.asarray(got[0]), np.asarray(expected[0])), (x, got, expected)
    assert len(taken) == 4  # both sides of the join, each with both sides of the exit


def test_a_value_the_sides_disagree_on_refuses_the_lowering_only_where_it_is_read():
    first, double, mean = _parts()
    grown = (double[0], HostOp(_statement("n += 1")), HostOp(_statement("names = []")))
    join, join_test = _if("t")
    ret = _statement("return y, names")
    graph = HCFG("forward", ("x",), (first[0], HostOp(_statement("n = 0")),
                                     Cond(0, join, join_test, grown, ()), Return(ret, ret.body[0].value)))
    with pytest.raises(NotLowerable, match="names"):
        _run(graph, (first, double, mean))
    ret = _statement("return y, n")
    graph = HCFG("forward", ("x",), (first[0], HostOp(_statement("n = 0")),
                                     Cond(0, join, join_test, grown, ()), Return(ret, ret.body[0].value)))
    lowered, _ = _run(graph, (first, double, mean))
    assert lowered.stats["paths"] == 1


def test_what_it_cannot_compute_is_refused_by_name():
    parts = _parts()
    with pytest.raises(NotLowerable, match="n // 10"):
        _run(_graph(*parts, late="n // 10"), parts)
    with pytest.raises(NotLowerable, match="arithmetic"):  # a number read from a tensor: Python's has no int64 bound
        _run(_graph(*parts, late="n + u.item()"), parts)
    with pytest.raises(NotLowerable, match="comparison"):
        _run(_graph(*parts, exit_test="u.item() is None"), parts)


def test_tests_on_booleans_are_ordered_as_python_orders_them():
    parts = _parts()
    # t is a bool tensor: `t.item() > False` is `t` in Python; ONNX orders no bools, so they compare as int64
    leave, test = _if("t.item() > False")
    ret, ret_list = _statement("return y"), _statement("return [y]")
    graph = HCFG("forward", ("x",), (parts[0][0], Cond(0, leave, test, (Return(ret, ret.body[0].value),), ()),
                                     Return(ret_list, ret_list.body[0].value)))
    lowered, session = _run(graph, parts)
    taken = set()
    for value in (-1.0, 2.0, 0.0, 3.0):
        *outputs, path = session.run(None, {"x": np.array([[value]], np.float32)})
        taken.add(int(path))
        assert int(path) == (0 if value > 0 else 1)
        assert lowered.paths[int(path)][1][0] == ("slot" if value > 0 else "list")
    assert taken == {0, 1}


def test_returns_on_some_paths_repeat_the_rest_only_within_a_bound():
    first, double, mean = _parts()

    def chain(depth: int) -> HCFG:
        """``depth`` ifs, each returning on one inner side only: the rest is lowered on both sides of each."""
        body: tuple = (mean[0], Return(_statement("return y"), _statement("return y").body[0].value))
        for level in range(depth):
            inner, inner_test = _if(f"u.item() > {level}")
            outer, outer_test = _if("t")
            stop = _statement("return [y]")
            body = (Cond(2 * level, outer, outer_test, (Cond(2 * level + 1, inner, inner_test,
                                                              (Return(stop, stop.body[0].value),), ()),), ()),
                    *body)
        return HCFG("forward", ("x",), (first[0], mean[0], *body))

    lowered, _ = _run(chain(1), (first, double, mean))
    assert lowered.stats["paths"] == 3  # the inner return, and the rest on both sides of the outer if
    with pytest.raises(NotLowerable, match="repeat"):
        _run(chain(12), (first, double, mean))  # 2**12 copies of the tail: refused, not built


def test_a_constant_the_tensor_type_holds_exactly_is_compared_without_a_cast():
    parts = _parts()
    lowered, session = _run(_graph(*parts, exit_test="u.item() >= 0.5"), parts)
    model = onnx.load_from_string(lowered.model)
    assert not any(node.op_type == "Cast" for node in model.graph.node)  # 0.5 is a float32: no cast per test
    taken = set()
    below = float(np.nextafter(np.float32(0.25), np.float32(0)))
    for value in (0.25, below, 0.3, 0.1, -1.0):
        x = np.array([[value]], np.float32)
        *_, path = session.run(None, {"x": x})
        u = (2 * np.maximum(x, 0)).mean(dtype=np.float32).item() if x.sum() > 0 else np.maximum(x, 0).mean().item()
        assert int(path) == (0 if u >= 0.5 else 1), (value, u, path)  # as Python compares the .item()
        taken.add(int(path))
    assert taken == {0, 1}
    inexact, _ = _run(_graph(*parts, exit_test="u.item() >= 0.7"), parts)  # 0.7 is not: compared as a double
    assert any(node.op_type == "Cast" for node in onnx.load_from_string(inexact.model).graph.node)
