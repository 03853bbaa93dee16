"""Deliberately broken "compilers" for testing the fuzzer itself."""

from __future__ import annotations

import copy
import inspect

import torch
from dycl.rewriter.errors import SourceLocation

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


def crashes(model, example, backend="torch"):
    raise RuntimeError("fake compiler crash")


def unsupported(model, example, backend="torch"):
    raise dycl.UnsupportedError("fake construct", None)


def crash_at_run(model, example, backend="torch"):
    def run(*args):
        raise ValueError("fake runtime failure")
    return run


def identity(model, example, backend="torch"):
    """A perfect "compiler": the model itself (state carried between calls exactly as eager)."""
    return model


def changes_a_buffer(model, example, backend="torch"):
    """Compiles correctly but, like a compiler that probes forward on the live model, leaves a buffer changed."""
    with torch.no_grad():
        next(model.buffers()).add_(1)
    return model


def switches_to_eval(model, example, backend="torch"):
    """Compiles correctly but switches the user's model to eval mode."""
    return model.eval()


def freezes_state(model, example, backend="torch"):
    """Compiles the model's state as a constant: every call starts from the state at compile time."""
    frozen = copy.deepcopy(model)
    return lambda *args: copy.deepcopy(frozen)(*args)


def refuses_train_mode(model, example, backend="torch"):
    """Refuses any model as a train-mode model is refused (a ValueError pointing at eval())."""
    raise ValueError("the model is in train mode; call model.eval() or pass mode='eval'")


def wrong_when(text: str):
    """A compiler equal to eager, except that models whose class source contains ``text`` (in the
    model's class or any of its submodules' classes) add 1 to their first output."""
    def compile_fn(model, example, backend="torch"):
        sources = {inspect.getsource(type(module)) for module in model.modules()
                   if not type(module).__module__.startswith("torch")}
        if any(text in source for source in sources):
            return lambda *args: _off_by_one(model(*args))
        return model
    return compile_fn


def changes_a_buffer_then_refuses(model, example, backend="torch"):
    """Probes forward on the live model, then refuses it, leaving a buffer changed."""
    changes_a_buffer(model, example, backend)
    raise dycl.UnsupportedError("fake refusal after probing", None)


def refuses_by_construct(model, example, backend="torch"):
    """Refuses every model with ``while`` (naming the class and a line, as dycl's refusals do), and
    models with no ``while`` for their ``if``; compiles nothing."""
    name = type(model).__name__
    where = SourceLocation(f"/tmp/{name}.py", len(name))
    if "while" in inspect.getsource(type(model)):
        raise dycl.UnsupportedError(f"a while loop in `{name}` (line {len(name)})", where)
    raise dycl.UnsupportedError(f"an if statement in '{name}'", where)
