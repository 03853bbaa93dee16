"""Mask code written the way transformers' ``masking_utils`` is: a shortcut that decides on
the mask's values, skipped by an early exit while a tracer runs."""

import torch


def is_tracing(tensor=None) -> bool:
    return torch.jit.is_tracing()


def padding_or_none(mask: torch.Tensor):
    """None where nothing is padded (the caller then needs no mask); the mask otherwise."""
    if is_tracing(mask):
        return mask  # a traced graph always takes the general path
    if mask.all():
        return None
    return mask


def wrongly_guarded(mask: torch.Tensor):
    """The exit does not fire under the tracer for a 2-D mask: the decision below is made while
    tracing, and must be refused, not frozen."""
    if is_tracing(mask) and mask.dim() == 5:
        return mask
    if mask.all():
        return None
    return mask


def masked_scores(scores: torch.Tensor, mask) -> torch.Tensor:
    return scores if mask is None else scores.masked_fill(mask[:, None, :] == 0, -1e4)
