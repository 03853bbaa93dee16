"""Recurrent layers as explicit per-step arithmetic while a sub-DNN is exported for TVM.

TVM's ONNX frontend has no LSTM, GRU or RNN operator; while ``recurrent_layers_unrolled``
is active, ``nn.LSTM``/``nn.GRU``/``nn.RNN`` compute the same thing step by step with
matmuls and pointwise gates, which export to operators the frontend knows.
"""

from __future__ import annotations

import contextlib
from typing import Any


@contextlib.contextmanager
def recurrent_layers_unrolled():
    """While exporting, ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` run as their
    equations step by step (MatMul, Sigmoid, Tanh: operators TVM imports) instead
    of exporting the ONNX LSTM/GRU/RNN operators, which TVM 0.27 cannot import.
    The sequence length is static in a sub-DNN's export, so the unrolling is exact."""
    import torch

    layers = {torch.nn.LSTM: _unrolled_lstm, torch.nn.GRU: _unrolled_gru, torch.nn.RNN: _unrolled_rnn}
    saved = {cls: cls.forward for cls in layers}

    def patched(unrolled, original):
        def forward(self, input, hx=None):
            if isinstance(input, torch.nn.utils.rnn.PackedSequence) or getattr(self, "proj_size", 0):
                return original(self, input, hx)
            return _run_unrolled(self, input, hx, unrolled)

        return forward

    for cls, unrolled in layers.items():
        cls.forward = patched(unrolled, saved[cls])
    try:
        yield
    finally:
        for cls, forward in saved.items():
            cls.forward = forward


def _run_unrolled(layer, input, hx, step):
    """``layer(input, hx)`` (any of the three, any layers/directions/batch_first, batched or not)."""
    import torch

    lstm = isinstance(layer, torch.nn.LSTM)
    unbatched = input.dim() == 2
    x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if layer.batch_first else input)
    directions = 2 if layer.bidirectional else 1
    shape = (layer.num_layers * directions, x.shape[1], layer.hidden_size)
    if hx is None:
        zeros = x.new_zeros(shape)
        hx = (zeros, zeros) if lstm else zeros
    elif unbatched:
        hx = tuple(h.unsqueeze(1) for h in hx) if lstm else hx.unsqueeze(1)
    h0, c0 = hx if lstm else (hx, None)
    last_h, last_c = [], []
    for number in range(layer.num_layers):
        outputs = []
        for direction in range(directions):
            suffix = f"l{number}" + ("_reverse" if direction else "")
            weights = [getattr(layer, f"{kind}_{suffix}", None) for kind in ("weight_ih", "weight_hh", "bias_ih",
                                                                              "bias_hh")]
            index = number * directions + direction
            h, c = h0[index], (c0[index] if lstm else None)
            steps = range(x.shape[0] - 1, -1, -1) if direction else range(x.shape[0])
            out = [None] * x.shape[0]
            for t in steps:
                h, c = step(layer, x[t], h, c, *weights)
                out[t] = h
            outputs.append(torch.stack(out))
            last_h.append(h)
            last_c.append(c)
        x = torch.cat(outputs, dim=2) if directions == 2 else outputs[0]
    output = x.squeeze(1) if unbatched else (x.transpose(0, 1) if layer.batch_first else x)
    h_n = torch.stack(last_h)
    h_n = h_n.squeeze(1) if unbatched else h_n
    if lstm:
        c_n = torch.stack(last_c)
        return output, (h_n, c_n.squeeze(1) if unbatched else c_n)
    return output, h_n


def _gates(gates, size: int, count: int) -> list[Any]:
    # constant slices: ``chunk`` exports Shape/Gather/Div/Slice, and TVM's ONNX
    # frontend fails on Shape -> Gather of a tensor that came out of such a
    # dynamic Slice (see tuning_problems)
    return [gates[..., k * size:(k + 1) * size] for k in range(count)]


def _affine(x, h, w_ih, w_hh, b_ih, b_hh):
    import torch

    gates_x = torch.matmul(x, w_ih.t()) + (b_ih if b_ih is not None else 0)
    gates_h = torch.matmul(h, w_hh.t()) + (b_hh if b_hh is not None else 0)
    return gates_x, gates_h


def _unrolled_lstm(layer, x, h, c, w_ih, w_hh, b_ih, b_hh):
    import torch

    gates_x, gates_h = _affine(x, h, w_ih, w_hh, b_ih, b_hh)
    i, f, g, o = _gates(gates_x + gates_h, layer.hidden_size, 4)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _unrolled_gru(layer, x, h, c, w_ih, w_hh, b_ih, b_hh):
    import torch

    gates_x, gates_h = _affine(x, h, w_ih, w_hh, b_ih, b_hh)
    r_x, z_x, n_x = _gates(gates_x, layer.hidden_size, 3)
    r_h, z_h, n_h = _gates(gates_h, layer.hidden_size, 3)
    r, z = torch.sigmoid(r_x + r_h), torch.sigmoid(z_x + z_h)
    n = torch.tanh(n_x + r * n_h)
    return (1 - z) * n + z * h, None


def _unrolled_rnn(layer, x, h, c, w_ih, w_hh, b_ih, b_hh):
    import torch

    gates_x, gates_h = _affine(x, h, w_ih, w_hh, b_ih, b_hh)
    activation = torch.tanh if layer.nonlinearity == "tanh" else torch.relu
    return activation(gates_x + gates_h), None

