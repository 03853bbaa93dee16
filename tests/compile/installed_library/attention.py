"""Attention written the way Hugging Face's is: Python decides on sizes
(``is_causal = q_len > 1``; a chunked path for large batches)."""

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, causal: bool = True, chunk_above: int = 4) -> None:
        super().__init__()
        self.heads, self.causal, self.chunk_above = heads, causal, chunk_above
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        batch, q_len, dim = hidden.shape
        q, k, v = self.qkv(hidden).view(batch, q_len, 3, self.heads, dim // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        is_causal = q_len > 1 and self.causal
        if batch > self.chunk_above:
            # memory saving path for large batches
            chunks = zip(q.split(self.chunk_above), k.split(self.chunk_above), v.split(self.chunk_above))
            parts = [F.scaled_dot_product_attention(a, b, c, is_causal=is_causal) for a, b, c in chunks]
            attended = torch.cat(parts)
        else:
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        return self.out(attended.transpose(1, 2).reshape(batch, q_len, dim))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    if x.shape[-1] % 2:
        raise ValueError("odd feature size")
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def normalised(h: torch.Tensor) -> torch.Tensor:
    """Decides on the values: followed and rewritten like user code (dycl.model.library_decisions)."""
    return h / h.norm() if bool(h.norm() > 1) else h


def add_positions(hidden: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Treats a batch of 1 apart, as transformers' mask code does with position ids."""
    positions = table[: hidden.shape[1]].unsqueeze(0)
    if hidden.shape[0] != positions.shape[0]:
        positions = positions.expand(hidden.shape[0], -1, -1)
    return hidden + positions
