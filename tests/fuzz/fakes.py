"""Deliberately broken "compilers" for testing the fuzzer itself."""

from __future__ import annotations

import inspect

import torch

import dycl


def _off_by_one(output):
    if isinstance(output, tuple):
        return (_off_by_one(output[0]),) + output[1:]
    return output + 1 if isinstance(output, torch.Tensor) else output


def wrong_on_while(model, example, backend="torch"):
    """Equals eager, except that models whose class source has a ``while`` loop add 1 to their first output."""
    if "while" in inspect.getsource(type(model)):
        return lambda *args: _off_by_one(model(*args))
    return model


def crash_on_continue(model, example, backend="torch"):
    """Raises while "compiling" models with a ``continue``; else eager."""
    if "continue" in inspect.getsource(type(model)):
        raise RuntimeError("fake compiler cannot take continue")
    return model


def unsupported(model, example, backend="torch"):
    raise dycl.UnsupportedError("fake construct", None)


def crash_at_run(model, example, backend="torch"):
    def run(*args):
        raise ValueError("fake runtime failure")
    return run
