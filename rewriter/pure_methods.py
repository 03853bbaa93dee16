"""Which methods of a model's modules constant propagation may call at compile time.

A method such as RANet's ``def _blockType(self): return 'norm'`` describes a module's
configuration: ``if self.flows[i]._blockType() == 'norm':`` is a static test, and
folding it drops the branch no call can take (whose code may not even run on the
example's values). The static evaluator calls no user code in general; it calls a
method of an ``nn.Module`` only where ``is_pure_method`` proves from its source that
calling it reads and changes nothing but what a static expression could read.

Assumes: a method's source (``inspect.getsource``) is the code that runs; reading an
instance attribute that is not a ``property`` of the class runs no code.
Guarantees: ``is_pure_method`` is True only for a bound method of an ``nn.Module``,
undecorated, whose body is (after a docstring) a single ``return <expression>``, where
the expression holds no call, lambda, comprehension, walrus, ``await`` or ``yield`` and
reads no attribute of ``self`` that is a ``property`` (or other descriptor with a
getter that runs code) of its class. Anything else is False: the call stays dynamic.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types

import torch

_ALLOWED_NODES = (
    ast.Constant, ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Dict, ast.Set,
    ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Load, ast.operator, ast.unaryop,
    ast.boolop, ast.cmpop, ast.expr_context,
)


#: bytecode bytes of the longest method worth parsing (``return`` of a small expression needs far fewer)
_LONGEST = 400


def _returned_expression(function: types.FunctionType) -> ast.expr | None:
    """The expression of a function whose body is one ``return`` (after a docstring)."""
    return _returned_expression_of(function.__code__)


@functools.lru_cache(maxsize=1024)
def _returned_expression_of(code: types.CodeType) -> ast.expr | None:
    """``_returned_expression`` by code object: the evaluator asks again for every call site it
    folds (892 times in one compile of the zoo's translation model), and reading the source
    is the cost. Callers only read the tree."""
    try:
        source = textwrap.dedent(inspect.getsource(code))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    definition = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(definition, ast.FunctionDef) or definition.decorator_list:
        return None
    body = definition.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
            body[0].value.value, str):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    return body[0].value


def _reads_code_running_attribute(expression: ast.expr, owner: type, receiver: str) -> bool:
    """Whether ``expression`` reads ``<receiver>.<name>`` where ``name`` is a descriptor of
    ``owner`` whose read runs code (a ``property``, or any object with ``__get__`` that is not
    a plain function: methods are not called here, a call is refused anyway)."""
    for node in ast.walk(expression):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == receiver:
            found = inspect.getattr_static(owner, node.attr, None)
            if found is not None and hasattr(type(found), "__get__") and not isinstance(found, types.FunctionType):
                return True
    return False


def receiver_reads(method: types.MethodType) -> tuple[str, ...]:
    """The attributes of its receiver that a pure method reads (``self.<name>``), so that
    the values it was folded with are guarded like any other read (``rewriter.config_reads``)."""
    expression = _returned_expression(method.__func__)
    receiver = next(iter(inspect.signature(method.__func__).parameters), None)
    if expression is None or receiver is None:
        return ()
    return tuple(dict.fromkeys(node.attr for node in ast.walk(expression) if isinstance(node, ast.Attribute)
                               and isinstance(node.value, ast.Name) and node.value.id == receiver))


def is_pure_method(method: object) -> bool:
    """Whether calling ``method`` (a bound method of an ``nn.Module``) only computes a
    static expression of its arguments and its module's attributes (see the module note)."""
    if not isinstance(method, types.MethodType) or not isinstance(method.__self__, torch.nn.Module):
        return False
    function = method.__func__
    if not isinstance(function, types.FunctionType) or len(function.__code__.co_code) > _LONGEST:
        return False  # a one-expression method is short: longer ones are not parsed at all
    expression = _returned_expression(function)
    if expression is None or not all(isinstance(node, _ALLOWED_NODES) for node in ast.walk(expression)):
        return False
    parameters = list(inspect.signature(function).parameters)
    return bool(parameters) and not _reads_code_running_attribute(expression, type(method.__self__),
                                                                   parameters[0])


__all__ = ["is_pure_method", "receiver_reads"]
