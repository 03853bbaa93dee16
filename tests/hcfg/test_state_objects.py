"""``hcfg.state_objects``: which objects cross sub-DNN boundaries as records of their
attributes (a KV cache), and how: flags compiled in, tensors and numbers as ports, rebuilt as the class."""

from __future__ import annotations

import abc
from dataclasses import dataclass

import torch
from dycl.hcfg.ports import Record, Static, describe
from dycl.hcfg.pytree_ports import layout_of, port_values, rebuild, snapshot
from dycl.hcfg.state_objects import holds_tensor, is_state_object
from torch import nn


class LayerBase(abc.ABC):  # abc.ABC's empty __slots__ do not count (transformers' CacheLayerMixin)
    @abc.abstractmethod
    def length(self) -> int: ...


class Layer(LayerBase):
    def __init__(self, keys: torch.Tensor) -> None:
        self.keys = keys
        self.is_initialized = True
        self.seen = keys.shape[-1]

    def length(self) -> int:
        return self.keys.shape[-1]


class Cache:
    def __init__(self, *layers: Layer) -> None:
        self.layers = list(layers)
        self.offloading = False


class Slotted:
    __slots__ = ("keys",)


class Pickled:
    def __getstate__(self):
        return {}


@dataclass
class Point:
    x: torch.Tensor


def test_plain_python_objects_are_state_objects_and_others_are_not():
    cache = Cache(Layer(torch.ones(1, 2)))
    assert is_state_object(cache) and is_state_object(cache.layers[0]) and holds_tensor(cache)
    assert not holds_tensor(Cache())
    for other in (Slotted(), Pickled(), Point(torch.ones(1)), nn.Linear(1, 1), torch.Generator(), torch.ones(1),
                  Cache, len, {"a": 1}, [1], 3, "s", torch.float32):
        assert not is_state_object(other), other


def test_a_cache_is_a_record_with_its_flags_compiled_in_and_rebuilt_as_its_class():
    cache = Cache(Layer(torch.ones(1, 2)), Layer(torch.zeros(1, 3)))
    layout = layout_of(cache)
    (record,) = layout.leaves
    assert isinstance(record, Record) and record.cls is Cache and record.fields == ("layers", "offloading")
    assert layout.port_count == 4  # the two key tensors and the two ints; the flags are statics
    assert Static(False) in record.layout.leaves
    assert describe(layout)[0] == "record"
    back = rebuild(iter(port_values(cache, layout)), layout)
    assert type(back) is Cache and type(back.layers[1]) is Layer and back.layers[1].is_initialized is True
    assert torch.equal(back.layers[1].keys, torch.zeros(1, 3)) and back.layers is not cache.layers
    assert int(back.layers[1].seen) == 3  # an int port: a 0-d tensor here
    changed = Cache(Layer(torch.ones(1, 2)), Layer(torch.zeros(1, 3)))
    changed.layers[0].is_initialized = False
    assert layout_of(changed).signature() != layout.signature()  # another flag: another compiled form


def test_a_snapshot_keeps_what_a_sub_dnn_saw_when_the_cache_grows_in_place_later():
    cache = Cache(Layer(torch.ones(1, 2)))
    seen = snapshot(cache)
    cache.layers[0].keys = torch.cat([cache.layers[0].keys, torch.ones(1, 2)], dim=-1)
    assert seen.layers[0].keys.shape == (1, 2) and cache.layers[0].keys.shape == (1, 4)
