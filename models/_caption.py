"""Show-Attend-and-Tell captioning decoder shared by the two captioning models.

Xu et al., "Show, Attend and Tell" (ICML 2015): a CNN encoder yields a grid of
feature vectors; an LSTM decoder attends softly over the grid at every step (additive
attention, context gated by ``sigmoid(f_beta(h))``) and emits one word. At inference
the caption is decoded greedily until the end token or ``max_len`` words. The code
follows the widely used PyTorch re-implementation (``DecoderWithAttention``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from models import _common

VOCAB_SIZE = 40
EMBED_DIM = 16
DECODER_DIM = 32
ATTENTION_DIM = 16
MAX_LEN = 12
START_TOKEN = 1
END_TOKEN = 2
LSTM_GAIN = 3.0


class Attention(nn.Module):
    """Additive attention over the encoder grid."""

    def __init__(self, encoder_dim: int, decoder_dim: int, attention_dim: int) -> None:
        super().__init__()
        self.encoder_att = nn.Linear(encoder_dim, attention_dim)
        self.decoder_att = nn.Linear(decoder_dim, attention_dim)
        self.full_att = nn.Linear(attention_dim, 1)

    def forward(self, encoder_out: Tensor, decoder_hidden: Tensor) -> tuple[Tensor, Tensor]:
        att1 = self.encoder_att(encoder_out)  # (N, P, A)
        att2 = self.decoder_att(decoder_hidden)  # (N, A)
        att = self.full_att(torch.relu(att1 + att2.unsqueeze(1))).squeeze(2)  # (N, P)
        alpha = torch.softmax(att, dim=1)
        context = (encoder_out * alpha.unsqueeze(2)).sum(dim=1)  # (N, encoder_dim)
        return context, alpha


class DecoderWithAttention(nn.Module):
    """LSTM decoder with soft attention; ``forward`` decodes greedily."""

    def __init__(self, encoder_dim: int) -> None:
        super().__init__()
        self.max_len = MAX_LEN
        self.start_token = START_TOKEN
        self.end_token = END_TOKEN
        self.attention = Attention(encoder_dim, DECODER_DIM, ATTENTION_DIM)
        self.embedding = nn.Embedding(VOCAB_SIZE, EMBED_DIM)
        self.decode_step = nn.LSTMCell(EMBED_DIM + encoder_dim, DECODER_DIM)
        self.init_h = nn.Linear(encoder_dim, DECODER_DIM)
        self.init_c = nn.Linear(encoder_dim, DECODER_DIM)
        self.f_beta = nn.Linear(DECODER_DIM, encoder_dim)
        self.fc = nn.Linear(DECODER_DIM, VOCAB_SIZE)
        with torch.no_grad():
            # A larger LSTM gain keeps the random decoder from settling on one repeated
            # word, so captions of different images stop at different lengths.
            self.decode_step.weight_ih.mul_(LSTM_GAIN)
            self.decode_step.weight_hh.mul_(LSTM_GAIN)

    def step(self, word: Tensor, encoder_out: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One decoding step: word scores and the new LSTM state."""
        embeddings = self.embedding(word)
        context, alpha = self.attention(encoder_out, h)
        gate = torch.sigmoid(self.f_beta(h))
        context = gate * context
        h, c = self.decode_step(torch.cat([embeddings, context], dim=1), (h, c))
        scores = self.fc(h)
        return scores, h, c

    def forward(self, encoder_out: Tensor) -> Tensor:
        # (1, C, H, W) feature map -> (1, H*W, C) grid of feature vectors
        encoder_out = encoder_out.flatten(2).permute(0, 2, 1)
        mean_encoder_out = encoder_out.mean(dim=1)
        h = self.init_h(mean_encoder_out)
        c = self.init_c(mean_encoder_out)

        word = torch.full((encoder_out.size(0),), self.start_token, dtype=torch.long)
        words = []
        for t in range(self.max_len):
            scores, h, c = self.step(word, encoder_out, h, c)
            word = scores.argmax(dim=-1)
            words.append(word)
            if word.item() == self.end_token:
                break
        return torch.stack(words, dim=1)


class Captioner(nn.Module):
    """CNN encoder + attention LSTM decoder; returns the (1, length) caption token ids."""

    def __init__(self, encoder: nn.Module, encoder_dim: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = DecoderWithAttention(encoder_dim)

    def forward(self, images: Tensor) -> Tensor:
        features = self.encoder(images)
        return self.decoder(features)


@torch.no_grad()
def _decode_without_end(decoder: DecoderWithAttention, features: Tensor) -> tuple[Tensor, Tensor]:
    """Batched greedy decoding for ``max_len`` steps in which the end token never wins.

    Returns all scores (N, T, vocab) and the end token's margin over the best other word (N, T).
    """
    encoder_out = features.flatten(2).permute(0, 2, 1)
    mean_encoder_out = encoder_out.mean(dim=1)
    h, c = decoder.init_h(mean_encoder_out), decoder.init_c(mean_encoder_out)
    word = torch.full((features.shape[0],), decoder.start_token, dtype=torch.long)
    all_scores, margins = [], []
    for _ in range(decoder.max_len):
        scores, h, c = decoder.step(word, encoder_out, h, c)
        others = scores.clone()
        others[:, decoder.end_token] = float("-inf")
        best, word = others.max(dim=1)
        all_scores.append(scores)
        margins.append(scores[:, decoder.end_token] - best)
    return torch.stack(all_scores, dim=1), torch.stack(margins, dim=1)


@torch.no_grad()
def calibrate(model: Captioner, sample: Callable[[int], Tensor]) -> Captioner:
    """Standardise the encoder's BN statistics and the word scores, then bias the end token.

    The word-score layer is rescaled so that every word's score has zero mean and unit
    spread over the calibration captions (otherwise one word wins every step); then the
    end-token bias is the one whose greedy caption lengths over the calibration images
    are spread most evenly (``models._common.end_bias``).
    """
    batch = _common.calibration_batch(sample)
    _common.recalibrate_batchnorm(model.encoder, lambda: model.encoder(batch))
    model.eval()
    features = model.encoder(batch)
    scores, _ = _decode_without_end(model.decoder, features)
    _common.standardize_logits_(model.decoder.fc, scores.flatten(0, 1))
    _, margins = _decode_without_end(model.decoder, features)
    model.decoder.fc.bias[model.decoder.end_token] += _common.end_bias(margins)
    return model


def postprocess(output: Tensor) -> tuple[int, ...]:
    """The caption as a tuple of token ids (the end token included when emitted)."""
    return tuple(int(v) for v in output.reshape(-1).tolist())
