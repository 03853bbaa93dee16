"""The port/variant IR on its own (no ``dycl.compile``): layouts of Python values
(``hcfg.ports``, ``hcfg.pytree_ports``), the host's walker over their structure
descriptions (``hostgen.port_trees``), variants from hand-made examples
(``hcfg.variants``) and the host's stand-ins for records (``hostgen.stand_ins``)."""

from __future__ import annotations

import ast
import dataclasses
import types
from collections import OrderedDict, namedtuple
from pathlib import Path

import libcst as cst
import numpy as np
import pytest
import torch
from dycl.hcfg.graph import SubDNN
from dycl.hcfg.ports import Record, Static, describe
from dycl.hcfg.pytree_ports import NotAPortValue, layout_of, port_values, rebuild
from dycl.hcfg.trace import Examples
from dycl.hcfg.variants import variants_of
from dycl.hostgen import port_trees
from dycl.hostgen.copies import copied
from dycl.hostgen.manifest import PortStructureError
from dycl.hostgen.stand_ins import record_stand_in
from dycl.rewriter.errors import UnsupportedError

Pair = namedtuple("Pair", ["left", "right"])


@dataclasses.dataclass
class Cache:
    key: torch.Tensor
    length: int
    device: torch.device


def _value():
    """A nested value with every kind of leaf and node."""
    t = torch.arange(6.0).reshape(2, 3)
    return {
        "views": [t, t + 1],
        "pair": Pair(t * 2, (t - 1, 3)),
        "cache": Cache(t.sum(0), 4, torch.device("cpu")),
        "meta": (torch.float16, None, "mean", torch.Size([2, 3])),
        "flag": True,
    }


def test_a_layout_lists_ports_statics_and_records_in_tree_flatten_order():
    layout = layout_of(_value())
    kinds = [leaf if isinstance(leaf, str) else type(leaf).__name__ for leaf in layout.leaves]
    assert kinds == ["tensor", "tensor", "tensor", "tensor", "int", "Record", "Static", "Static", "Static",
                     "int", "int", "bool"]
    record = layout.leaves[5]
    assert isinstance(record, Record) and record.cls is Cache and record.fields == ("key", "length", "device")
    assert layout.port_count == 2 + 3 + 2 + 2 + 1  # the record's device is a static
    assert not layout.is_port and not layout.is_tensor_list
    assert layout_of(torch.ones(2)).is_port and layout_of(3).is_port
    assert layout_of([torch.ones(1), torch.ones(2)]).is_tensor_list
    assert not layout_of([torch.ones(1), 2]).is_tensor_list
    assert layout_of(torch.device("cpu")).port_count == 0


def test_leaves_no_port_can_carry_are_named_and_a_registered_dict_subclass_is_a_mapping():
    with pytest.raises(NotAPortValue) as error:
        layout_of({"a": torch.ones(1), "b": object()})
    assert type(error.value.value) is object
    with pytest.raises(NotAPortValue):
        layout_of(np.float32(1.0))  # numpy scalars are not Python numbers

    class Output(OrderedDict):  # a registered dict subclass with attributes, like a ModelOutput
        pass

    torch.utils._pytree.register_pytree_node(
        Output, lambda d: (list(d.values()), list(d)), lambda values, keys: Output(zip(keys, values)))
    try:  # a mapping now (a ModelOutput holding a KV cache crosses sub-DNNs): rebuilt as its class
        value = [Output(a=torch.ones(1), b=torch.zeros(2))]
        layout = layout_of(value)
        assert describe(layout) == ["list", [], [["mapping", ["Output", "a", "b"], ["tensor", "tensor"]]]]
        back = rebuild(iter(port_values(value, layout)), layout)
        assert type(back[0]) is Output and list(back[0]) == ["a", "b"] and torch.equal(back[0]["b"], torch.zeros(2))
    finally:
        torch.utils._pytree._deregister_pytree_node(Output)


def test_port_values_and_rebuild_round_trip_with_the_original_classes():
    value = _value()
    layout = layout_of(value)
    ports = port_values(value, layout)
    assert all(isinstance(p, torch.Tensor) for p in ports) and len(ports) == layout.port_count
    assert ports[4].dtype == torch.int64 and ports[4].ndim == 0 and ports[-1].dtype == torch.bool  # numbers: 0-d
    back = rebuild(iter(ports), layout)
    assert isinstance(back["pair"], Pair) and isinstance(back["cache"], Cache)
    assert back["cache"].device == torch.device("cpu") and back["meta"][0] is torch.float16
    assert [int(size) for size in back["meta"][3]] == [2, 3]  # a torch.Size of numbers passed as 0-d tensors
    assert torch.equal(back["views"][1], value["views"][1])
    assert list(back) == list(value)


def test_layout_signatures_tell_structures_apart():
    base = layout_of({"a": torch.ones(2), "b": torch.ones(2)})
    assert base.signature() == layout_of({"a": torch.zeros(3), "b": torch.ones(1)}).signature()  # shapes aside
    for other in ({"a": torch.ones(2)}, {"b": torch.ones(2), "a": torch.ones(2)}, [torch.ones(2), torch.ones(2)]):
        assert layout_of(other).signature() != base.signature(), other
    assert layout_of(torch.device("cpu")).signature() != layout_of(torch.device("meta")).signature()
    assert layout_of(torch.float32).signature() != layout_of(torch.float64).signature()


def test_describe_is_json_and_keeps_statics_as_host_values():
    tree = describe(layout_of(_value()))
    assert tree[0] == "dict" and tree[1] == ["views", "pair", "cache", "meta", "flag"]
    assert tree[2][1][0] == "namedtuple" and tree[2][1][1] == ["Pair", "left", "right"]
    assert tree[2][2] == ["record", ["Cache", "key", "length", "device"], ["tensor", "int", ["device", "cpu"]]]
    assert tree[2][3] == ["tuple", [], [["dtype", "float16"], ["static", None], ["static", "mean"],
                                        ["tuple", [], ["int", "int"]]]]
    assert describe(layout_of(torch.ones(1))) == "tensor"
    assert describe(layout_of(OrderedDict(a=torch.ones(1)))) == ["dict", ["a"], ["tensor"]]
    assert ast.literal_eval(repr(tree)) == tree  # the host holds it as a literal


def test_the_host_walker_round_trips_arrays_and_holds_plain_stand_ins():
    value = _value()
    layout = layout_of(value)
    tree = describe(layout)
    arrays = [p.numpy() for p in port_values(value, layout)]
    (held,) = port_trees.build_values(arrays, [tree])
    assert isinstance(held["views"], list) and isinstance(held["meta"], tuple)
    assert type(held["pair"]).__name__ == "Pair" and held["pair"].right[1] == 3  # a number, via .item()
    assert isinstance(held["cache"], types.SimpleNamespace) and held["cache"].device == "cpu"
    assert type(held["cache"].device).__name__ == "HostDevice" and held["cache"].device.type == "cpu"
    assert held["meta"][:3] == ("float16", None, "mean") and held["flag"] is True
    assert port_trees.HostDevice("cuda:1").index == 1 and port_trees.HostDevice("cpu").index is None
    leaves = port_trees.port_leaves(held, tree)
    assert len(leaves) == len(arrays) and all(np.array_equal(a, b) for a, b in zip(leaves, arrays))


def test_the_host_walker_refuses_a_value_of_another_structure():
    tree = describe(layout_of({"a": torch.ones(1), "b": [torch.ones(1), torch.ones(1)]}))
    with pytest.raises(ValueError, match="compiled for"):
        port_trees.port_leaves({"a": 1, "c": [1, 2]}, tree)
    with pytest.raises(ValueError, match="a list of 3 where the model was compiled for 2"):
        port_trees.port_leaves({"a": 1, "b": [1, 2, 3]}, tree)
    with pytest.raises(PortStructureError, match=r"a list where the model was compiled for a dict with keys "
                                                 r"\['a', 'b'\]"):
        port_trees.port_leaves([1, [1, 2]], tree)
    with pytest.raises(PortStructureError, match=r"a dict where the model was compiled for a list of 2"):
        port_trees.port_leaves({"a": 1, "b": {"p": 1, "q": 2}}, tree)


def test_the_host_walker_needs_only_the_standard_library():
    tree = ast.parse(copied(port_trees.__file__))  # as the host holds it: without the ``# dycl only`` lines
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in node.names}
    assert imported <= {"collections", "types"}, imported  # under private names in the host


def _sub(*lines: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> SubDNN:
    statements = tuple(cst.parse_statement(f"{line}  # net.py:{i + 10}\n") for i, line in enumerate(lines))
    return SubDNN(0, statements, inputs, outputs)


def _examples(inputs: list[tuple], outputs: list[tuple]) -> Examples:
    return Examples(inputs=inputs, outputs=outputs)


def test_variants_split_by_list_length_and_share_one_structure_otherwise():
    sub = _sub("h = torch.stack(tokens).sum(0) + feats['bias']", inputs=("feats", "tokens"), outputs=("h",))
    t = torch.ones(3)
    examples = _examples([({"bias": t}, [t, t]), ({"bias": t}, [t, t, t])], [(t,), (t,)])
    variants = variants_of(sub, examples)
    assert [v.key for v in variants] == [(2,), (3,)]
    assert [p.name for p in variants[1].inputs] == ["feats_0", "tokens_0", "tokens_1", "tokens_2"]
    assert [p.name for p in variants[0].outputs] == ["h:out"]
    assert len(variants[0].examples[0]) == 3


def test_variants_refuse_a_structure_that_differs_between_paths_at_its_line():
    sub = _sub("y = 1", "h = feats['a'] * 2", inputs=("feats",), outputs=("h",))
    t = torch.ones(3)
    examples = _examples([({"a": t},), ({"a": t, "b": t},)], [(t,), (t,)])
    with pytest.raises(UnsupportedError, match="a dict of 1 on one, a dict of 2 on another") as error:
        variants_of(sub, examples)
    assert str(error.value.location) == "net.py:11"  # the line that reads it


def test_variants_by_list_length_must_agree_on_every_other_structure():
    sub = _sub("h = torch.stack(tokens).sum(0) + feats['bias']", inputs=("feats", "tokens"), outputs=("h",))
    t = torch.ones(3)
    examples = _examples([({"bias": t}, [t, t]), ({"bias": t, "scale": t}, [t, t, t])], [(t,), (t,)])
    with pytest.raises(UnsupportedError, match="`feats` with a different structure"):
        variants_of(sub, examples)


def test_variants_by_list_length_must_return_one_structure():
    sub = _sub("doubled = [t * 2 for t in tokens]", inputs=("tokens",), outputs=("doubled",))
    t = torch.ones(3)
    examples = _examples([([t, t],), ([t, t, t],)], [([t, t],), ([t, t, t],)])
    with pytest.raises(UnsupportedError, match="a list of 2 on one, a list of 3 on another") as error:
        variants_of(sub, examples)
    assert str(error.value.location) == "net.py:10"


def test_variants_name_a_value_no_port_can_carry_and_its_line():
    sub = _sub("h = x * 2", "handle = object()", inputs=("x",), outputs=("h", "handle"))
    t = torch.ones(3)
    with pytest.raises(UnsupportedError, match="a value of type object in `handle`") as error:
        variants_of(sub, _examples([(t,)], [(t, object())]))
    assert str(error.value.location) == "net.py:11"  # the line that writes it


def test_a_plain_dataclass_gets_a_stand_in_and_others_do_not():
    source = record_stand_in("Cache", Cache)
    namespace: dict = {}
    exec(source, namespace)  # noqa: S102 - the generated stand-in
    cache = namespace["Cache"]("k", 3, device="cpu")
    assert (cache.key, cache.length, cache.device) == ("k", 3, "cpu")

    @dataclasses.dataclass
    class WithDefault:
        x: int = 2

    exec(record_stand_in("WithDefault", WithDefault), namespace)  # noqa: S102
    assert namespace["WithDefault"]().x == 2

    @dataclasses.dataclass
    class WithMethod:
        x: int

        def doubled(self):
            return self.x * 2

    @dataclasses.dataclass
    class WithFactory:
        x: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass
    class WithPostInit:
        x: int

        def __post_init__(self):
            self.x += 1

    class NotADataclass:
        pass

    for cls in (WithMethod, WithFactory, WithPostInit, NotADataclass):
        assert record_stand_in(cls.__name__, cls) is None, cls
    assert isinstance(layout_of(Cache(torch.ones(1), 1, torch.device("cpu"))).leaves[0], Record)
    assert isinstance(layout_of(None).leaves[0], Static)


def test_the_port_ir_module_needs_no_torch():
    from dycl.hcfg import ports

    tree = ast.parse(Path(ports.__file__).read_text())
    imported = {alias.name if isinstance(node, ast.Import) else node.module
                for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names}
    assert not any(name.split(".")[0] == "torch" for name in imported), imported
