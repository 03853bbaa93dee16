"""AttentionNet: a Transformer encoder-decoder translating with greedy decoding.

Original: the AttentionNet of the DyCL evaluation — the Transformer of Vaswani et al.
("Attention Is All You Need", NeurIPS 2017) for neural machine translation, written
in the style of the Annotated Transformer: token embeddings scaled by sqrt(d_model)
plus sinusoidal positions, post-norm encoder and decoder layers, a padding mask on
the source and a causal mask on the target, and a greedy decoding loop that re-runs
the decoder on the growing prefix and stops at the end-of-sentence token.

Shrunk: vocabulary 32 (0 = pad, 1 = bos, 2 = eos), d_model 32, 4 heads, feed-forward
64, 2 encoder and 2 decoder layers, no dropout; sources are 10 tokens (no padding) and
at most 16 target tokens are generated. The input is a (1, 10) LongTensor.

Calibration: on 128 calibration sources the generator is rescaled so that every word's
logit has zero mean and unit spread over the decoding steps (otherwise one word wins
every step); then the eos logit's bias is the one whose greedy output lengths over the
calibration sources are spread most evenly (``models._common.end_bias``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models import _common

VOCAB_SIZE = 32
PAD_TOKEN, BOS_TOKEN, EOS_TOKEN = 0, 1, 2
D_MODEL = 32
HEADS = 4
D_FF = 64
LAYERS = 2
SRC_LEN = 10
MAX_LEN = 16
MAX_POSITIONS = 64
EOS_RISE = 3.0


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over ``HEADS`` heads; ``mask`` is True where allowed."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.d_k = d_model // heads
        self.scale = 1.0 / math.sqrt(self.d_k)
        self.linear_q = nn.Linear(d_model, d_model)
        self.linear_k = nn.Linear(d_model, d_model)
        self.linear_v = nn.Linear(d_model, d_model)
        self.linear_out = nn.Linear(d_model, d_model)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor) -> Tensor:
        batch = query.size(0)
        q = self.linear_q(query).view(batch, -1, self.heads, self.d_k).transpose(1, 2)
        k = self.linear_k(key).view(batch, -1, self.heads, self.d_k).transpose(1, 2)
        v = self.linear_v(value).view(batch, -1, self.heads, self.d_k).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        scores = scores.masked_fill(mask.unsqueeze(1) == 0, -1e9)
        attn = F.softmax(scores, dim=-1)
        x = torch.matmul(attn, v).transpose(1, 2).contiguous().view(batch, -1, self.heads * self.d_k)
        return self.linear_out(x)


class FeedForward(nn.Module):
    """Position-wise two-layer MLP."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(F.relu(self.w_1(x)))


class EncoderLayer(nn.Module):
    """Self-attention and feed-forward, each with a residual connection and LayerNorm."""

    def __init__(self, d_model: int, heads: int, d_ff: int) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.norm1(x + self.self_attn(x, x, x, mask))
        return self.norm2(x + self.feed_forward(x))


class DecoderLayer(nn.Module):
    """Masked self-attention, attention over the encoder memory, feed-forward."""

    def __init__(self, d_model: int, heads: int, d_ff: int) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads)
        self.src_attn = MultiHeadAttention(d_model, heads)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        x = self.norm1(x + self.self_attn(x, x, x, tgt_mask))
        x = self.norm2(x + self.src_attn(x, memory, memory, src_mask))
        return self.norm3(x + self.feed_forward(x))


def positional_encoding(length: int, d_model: int) -> Tensor:
    """The (1, length, d_model) sinusoidal position table."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe[None]


class Transformer(nn.Module):
    """Encoder-decoder Transformer; ``forward`` translates greedily."""

    def __init__(self) -> None:
        super().__init__()
        self.pad_token, self.bos_token, self.eos_token = PAD_TOKEN, BOS_TOKEN, EOS_TOKEN
        self.max_len = MAX_LEN
        self.scale = math.sqrt(D_MODEL)
        self.src_embed = nn.Embedding(VOCAB_SIZE, D_MODEL)
        self.tgt_embed = nn.Embedding(VOCAB_SIZE, D_MODEL)
        # positions for source sentences up to MAX_POSITIONS tokens (rows do not depend on the table's length)
        self.register_buffer("pe", positional_encoding(max(SRC_LEN, MAX_LEN, MAX_POSITIONS) + 1, D_MODEL))
        self.encoder_layers = nn.ModuleList([EncoderLayer(D_MODEL, HEADS, D_FF) for _ in range(LAYERS)])
        self.decoder_layers = nn.ModuleList([DecoderLayer(D_MODEL, HEADS, D_FF) for _ in range(LAYERS)])
        self.generator = nn.Linear(D_MODEL, VOCAB_SIZE)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        x = self.src_embed(src) * self.scale + self.pe[:, : src.size(1)]
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, memory: Tensor, src_mask: Tensor, ys: Tensor) -> Tensor:
        size = ys.size(1)
        tgt_mask = torch.tril(torch.ones(size, size, dtype=torch.bool)).unsqueeze(0)
        x = self.tgt_embed(ys) * self.scale + self.pe[:, :size]
        for layer in self.decoder_layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return x

    def forward(self, src: Tensor) -> Tensor:
        src_mask = (src != self.pad_token).unsqueeze(-2)
        memory = self.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), self.bos_token, dtype=torch.long)
        for i in range(self.max_len):
            out = self.decode(memory, src_mask, ys)
            prob = self.generator(out[:, -1])
            next_word = prob.argmax(dim=1, keepdim=True)
            ys = torch.cat([ys, next_word], dim=1)
            if next_word.item() == self.eos_token:
                break
        return ys[:, 1:]


@torch.no_grad()
def _decoder_states(model: Transformer, src: Tensor) -> Tensor:
    """Batched greedy decoding for ``max_len`` steps in which eos is never chosen; returns
    the decoder output at the last position of every step, (N, T, d_model)."""
    src_mask = (src != model.pad_token).unsqueeze(-2)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), model.bos_token, dtype=torch.long)
    states = []
    for _ in range(model.max_len):
        state = model.decode(memory, src_mask, ys)[:, -1]
        logits = model.generator(state)
        logits[:, model.eos_token] = float("-inf")
        ys = torch.cat([ys, logits.argmax(dim=1, keepdim=True)], dim=1)
        states.append(state)
    return torch.stack(states, dim=1)


@torch.no_grad()
def _calibrate(model: Transformer, src: Tensor) -> None:
    states = _decoder_states(model, src)
    _common.standardize_logits_(model.generator, model.generator(states).flatten(0, 1))
    # Standardising changed the greedy words, hence the states the eos row is fitted on.
    states = _decoder_states(model, src)
    eos_row = _common.fit_rising_logit(states, EOS_RISE)
    model.generator.weight[model.eos_token] = eos_row[:-1]
    model.generator.bias[model.eos_token] = eos_row[-1]
    logits = model.generator(states)
    others = logits.clone()
    others[..., model.eos_token] = float("-inf")
    margins = logits[..., model.eos_token] - others.amax(dim=-1)
    model.generator.bias[model.eos_token] += _common.end_bias(margins)


def sample(seed: int) -> Tensor:
    """A seeded (1, 10) source sentence of non-special tokens."""
    return torch.randint(3, VOCAB_SIZE, (1, SRC_LEN), generator=_common.generator(seed))


def build() -> tuple[nn.Module, Tensor]:
    """The calibrated model in eval mode and an example input."""
    torch.manual_seed(0)
    model = Transformer().eval()
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)  # the Annotated Transformer's initialisation
    _calibrate(model, _common.calibration_batch(sample))
    return model, sample(0)


def postprocess(output: Tensor) -> tuple[int, ...]:
    """The translation as a tuple of token ids (eos included when emitted)."""
    return tuple(int(v) for v in output.reshape(-1).tolist())
