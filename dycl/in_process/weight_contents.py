"""Compare the weights' contents with compile time: a fixed sample per call, every byte on demand.

A write through ``param.data``, a numpy view of a parameter or its storage bumps no version
counter that ``dycl.in_process.staleness.WeightGuard`` can see. Whatever wrote, the written
bytes differ, so this module compares contents instead of asking which API wrote.

``ContentSample`` (per call) reads, for every CPU strided tensor it is given, its first and last
element and elements evenly spread between them: ``SAMPLE_BUDGET`` elements over all the tensors
(each at least its first and last), all in one numpy gather. The gather reads one numpy view over
the address span of the sampled words; the words are the gcd of the item sizes and the data
pointers (so every element is whole words and no word reaches outside its tensor). It holds the
tensors' storages (``untyped_storage()``), so memory the gather reads stays allocated while the
tensors point at it, and refuses to be copied or pickled (the view's span is mostly unmapped).

Assumes: the caller has checked, in the same call and before ``same()``, that every tensor's
``const_data_ptr()`` is still the one of compile time (``.data = other`` or ``resize_`` moves the data;
``CallGuard`` and ``WeightGuard`` check pointers first). Guarantees: ``same()`` is False whenever a
sampled element's bytes differ from compile time, and True when no byte differs; a write confined
to unsampled elements is not seen by it. ``ContentDigest`` (``dycl.check``, not per call) hashes
every byte of every tensor (blake2b, 128 bits): any write that changes a byte is seen there.
Tensors not on the CPU, not strided, empty or without memory of their own are left out of both
(their data cannot be read here); the caller guards them by identity, version and pointer.

Why 2048: the gather misses the cache on nearly every word (the weights lie far apart), so
its cost grows with the sample: on sdn_mobilenet (178 tensors) 1024 words cost about 1.3 µs,
2048 about 2.4 and 4096 about 5.3 on a quiet core (``benchmarks/weight_contents.py``), against
a budget of 5 µs per call; 2048 leaves room for a busy machine. That is 11 elements per tensor
there (a tensor of 11 or fewer, whole): a write changing a fraction f of one tensor's elements
at random positions escapes with probability about (1 - f) ** 11 for that tensor (a 50%
pruning: 0.05%), and a write to k such tensors escapes only if it escapes in all k.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
from collections.abc import Sequence

import numpy as np
import torch

SAMPLE_BUDGET = 2048
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def readable(tensor: torch.Tensor) -> bool:
    """Whether this module can read ``tensor``'s bytes (CPU, strided, not empty, with memory of its own:
    a wrapper subclass has none)."""
    if tensor.device.type != "cpu" or tensor.layout != torch.strided or tensor.numel() == 0:
        return False
    try:
        tensor.untyped_storage()  # raises for a tensor without a storage
        return tensor.const_data_ptr() != 0
    except (RuntimeError, NotImplementedError):
        return False


def _per_tensor(sizes: Sequence[int], budget: int) -> int:
    """How many elements each tensor gets: the largest q with sum(min(size, max(q, 2))) <= budget."""
    low, high = 2, max(sizes, default=2)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(size, middle) for size in sizes) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def _element_offsets(tensor: torch.Tensor, count: int) -> np.ndarray:
    """Byte offsets from ``const_data_ptr()`` of ``count`` elements: first, last and evenly spread."""
    numel = tensor.numel()
    flat = np.unique(np.linspace(0, numel - 1, min(count, numel)).round().astype(np.int64))
    if tensor.dim() == 0:
        return np.zeros(1, dtype=np.int64)
    index = np.unravel_index(flat, tuple(tensor.shape))
    return np.dot(np.stack(index, axis=1), np.asarray(tensor.stride(), dtype=np.int64)) * tensor.element_size()


class ContentSample:
    """A fixed sample of the bytes of ``tensors`` as they are now; ``same()`` compares it again."""

    def __init__(self, tensors: Sequence[torch.Tensor], budget: int = SAMPLE_BUDGET) -> None:
        self.positions = tuple(i for i, tensor in enumerate(tensors) if readable(tensor))
        chosen = [tensors[i] for i in self.positions]
        self._storages = tuple(tensor.untyped_storage() for tensor in chosen)  # keep the read memory allocated
        count = _per_tensor([tensor.numel() for tensor in chosen], budget)
        unit = math.gcd(8, *(tensor.element_size() for tensor in chosen),
                        *(tensor.const_data_ptr() for tensor in chosen))
        starts, owners = [], []
        for position, tensor in enumerate(chosen):
            offsets = tensor.const_data_ptr() + _element_offsets(tensor, count)
            words = (offsets[:, None] + np.arange(0, tensor.element_size(), unit)[None, :]).ravel()
            starts.append(words)
            owners.append(np.full(len(words), position, dtype=np.int64))
        addresses = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
        low = int(addresses.min()) if len(addresses) else 0
        span = (int(addresses.max()) + unit - low) if len(addresses) else 0
        buffer = (ctypes.c_char * span).from_address(low) if span else b""
        self._memory = np.frombuffer(buffer, dtype=_WORDS[unit])
        order = np.argsort(addresses, kind="stable")  # in address order: the gather walks memory forwards
        self._index = ((addresses[order] - low) // unit).astype(np.intp)
        self._owners = (np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64))[order]
        self._then = self._memory.take(self._index)
        self._then_bytes = self._then.tobytes()

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"ContentSample({len(self.positions)} tensors, {len(self)} words)"

    def __reduce__(self):
        # its numpy view spans the address range between the weights (terabytes apart, mostly unmapped):
        # copying or pickling it would read all of it. A copied model is a new model: compile it.
        raise TypeError("a ContentSample reads the weights where they were at compile time: it cannot be copied "
                        "or pickled (compile the copied model instead)")

    def same(self) -> bool:
        """Whether every sampled word holds what it held at construction (the pointers checked first)."""
        return self._memory.take(self._index).tobytes() == self._then_bytes  # a memcmp: cheaper than == then all()

    def changed(self) -> list[int]:
        """The positions (in the ``tensors`` given) whose sampled words differ now."""
        differ = self._memory.take(self._index) != self._then
        return [self.positions[owner] for owner in np.unique(self._owners[differ])]


def _digest(tensor: torch.Tensor) -> bytes:
    data = tensor.detach().resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8).numpy()
    return hashlib.blake2b(data, digest_size=16).digest()


class ContentDigest:
    """A hash of every byte of each readable tensor of ``tensors``; ``changed()`` names what differs now."""

    def __init__(self, tensors: Sequence[torch.Tensor]) -> None:
        self._tensors = tuple(tensors)
        self._digests = tuple(_digest(tensor) if readable(tensor) else None for tensor in self._tensors)

    def changed(self) -> list[int]:
        """The positions whose bytes differ from construction (a hash each: for ``dycl.check``, not per call)."""
        return [i for i, (tensor, then) in enumerate(zip(self._tensors, self._digests))
                if then is not None and _digest(tensor) != then]


__all__ = ["ContentSample", "ContentDigest", "SAMPLE_BUDGET", "readable"]
