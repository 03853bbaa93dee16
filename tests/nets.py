"""Small models shared by several test modules."""

from __future__ import annotations

import torch
from torch import nn


class Decoder(nn.Module):
    """Greedy decoding with a data-dependent `break`: the token list's length depends on the path."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 4)
        self.max_len = 4

    def forward(self, h):
        tokens = []
        for _ in range(self.max_len):
            h = self.cell(h, h)
            tokens.append(h.argmax(-1))
            if h.sum() > 0.5:
                break
        return torch.stack(tokens), len(tokens)
