"""Loops over an input's rows inside a helper method that forward() passes the input to by name
(``self._pool(frames)`` whose body does ``for frame in frames.unbind(1):``), the way people factor
pooling and gating out of forward: the helper's parameter is that input on every call, so its
static dims unroll there as in forward itself (``FunctionUnit.input_sizes``, ``inline.Callee.sizes``),
also two helpers deep. Each against eager in process and as a torch-free host on inputs that take
several paths (counted, asserted). Where the caller rebinds the input before the call, the helper's
parameter is another value and its loop is refused at its line, as before."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host

pytestmark = pytest.mark.filterwarnings("ignore")


class VoicedFramePooling(nn.Module):
    """Mean of the frames that are not silent (``(batch, time, dim)``), then a linear head."""

    def __init__(self, dim: int = 5, silence: float = 0.8) -> None:
        super().__init__()
        self.head = nn.Linear(dim, 3)
        self.silence = silence

    def _pool(self, frames):
        pooled = torch.zeros_like(frames[:, 0])
        voiced = 0
        for frame in frames.unbind(1):
            if frame.abs().mean() > self.silence:
                pooled = pooled + frame
                voiced += 1
        return pooled / max(voiced, 1)

    def forward(self, frames):
        return self.head(self._pool(frames))


class GatedChannels(nn.Module):
    """forward -> _encode -> _gate: the channel loop two helpers deep, over ``enumerate(x[0])``."""

    def __init__(self, channels: int = 3) -> None:
        super().__init__()
        self.mix = nn.Conv2d(channels, channels, 1)

    def _gate(self, x):
        kept = []
        for c, plane in enumerate(x[0]):
            if plane.mean() > 0:
                kept.append(plane * (c + 1))
            else:
                kept.append(-plane)
        return torch.stack(kept).unsqueeze(0)

    def _encode(self, x):
        return self.mix(self._gate(x))

    def forward(self, x):
        return self._encode(x)


class PoolsAShorterInput(VoicedFramePooling):
    def forward(self, frames):
        frames = frames[:, 1:]
        return self.head(self._pool(frames))


def _inputs(shape: tuple[int, ...], count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * (0.4 + (i % 4) * 0.3) for i in range(count)]


@pytest.mark.parametrize("make, shape, min_paths", [
    (VoicedFramePooling, (2, 4, 5), 4),
    (GatedChannels, (1, 3, 4, 4), 4),
], ids=["pooling helper", "two helpers deep"])
def test_a_loop_over_an_inputs_rows_in_a_helper_agrees_with_eager(make, shape, min_paths, tmp_path):
    torch.manual_seed(0)
    model = make().eval()
    assert assert_agrees_in_process_and_as_host(model, _inputs(shape, 32, seed=4), tmp_path, 1e-5,
                                                min_paths=min_paths) >= min_paths


def test_a_helper_given_a_rebound_input_does_not_take_its_sizes():
    with pytest.raises(dycl.UnsupportedError) as refused:
        dycl.compile(PoolsAShorterInput().eval(), torch.randn(2, 4, 5), progress=False)
    message = str(refused.value)
    assert "for loop" in message and "for frame in frames.unbind(1)" in message and "hint:" in message
