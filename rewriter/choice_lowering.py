"""The statements ``rewriter.choices`` writes for each kind of choice.

``Lowering`` writes, for one statement being rewritten (``like``: the new
statements carry its location), the ``if`` statements that make a choice and
the fresh name that holds its result. It decides nothing: ``Choices`` has
already found that the choice is made by a value that is not static.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst
from dycl.rewriter.choice_members import Members
from dycl.rewriter.exits import Block, make_block
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.names import Namespace
from dycl.rewriter.substitute import replace_names

_KEYWORD = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))  # `key=f`, as people write it
Option = tuple[cst.BaseExpression, cst.BaseExpression]  # (the test, the term that holds where it does)


class Lowering:
    """Writes choices as ``if`` statements at the location of ``like``."""

    def __init__(self, namespace: Namespace, like: cst.BaseStatement) -> None:
        self.namespace = namespace
        self.like = like

    def fresh(self, stem: str) -> str:
        return self.namespace.fresh(stem)

    def line(self, name: str, value: cst.BaseExpression) -> cst.SimpleStatementLine:
        assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)])
        return set_location(assign, comment_of(self.like))

    def if_(self, test: cst.BaseExpression, body: Block, orelse: Block = ()) -> cst.If:
        stmt = cst.If(test, make_block(body), orelse=cst.Else(make_block(orelse)) if orelse else None)
        return set_location(stmt, comment_of(self.like))

    def conditional(self, node: cst.IfExp) -> tuple[str, Block]:
        """``a if c else b`` → ``if c: t = a`` / ``else: t = b``."""
        result = self.fresh("choice")
        return result, [self.if_(node.test, [self.line(result, node.body)], [self.line(result, node.orelse)])]

    def truth(self, node: cst.BooleanOperation) -> tuple[str, Block]:
        """The truth of ``a and b``/``a or b`` in a test, as Python decides it: ``t = False``, then
        ``if a: if b: t = True`` (``or``: ``if a: t = True`` / ``else: if b: t = True``), each
        operand tested once and only where Python evaluates it. ``t`` is a Python bool on every
        path, whatever the operands are (a tensor, a number, a static flag)."""
        result = self.fresh("truth")
        return result, [self.line(result, cst.Name("False")), *self._when(node, [self.line(result, cst.Name("True"))])]

    def _when(self, node: cst.BaseExpression, then: Block) -> Block:
        """Statements that run ``then`` exactly where ``node`` is true."""
        node = _unparenthesized(node)
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
            return self._when(node.left, self._when(node.right, then))
        if isinstance(node, cst.BooleanOperation):  # ``or``: a left that is itself and/or is lowered when rewalked
            return [self.if_(node.left, then, self._when(node.right, then))]
        return [self.if_(node, then)]

    def value(self, node: cst.BooleanOperation) -> tuple[str, Block]:
        """The value of ``a and b`` (``a or b``) outside a test: ``t = a``, then ``if t: t = b``
        (``if not t: t = b``): ``bool(a)`` on the host, ``b`` evaluated only where Python does."""
        result = self.fresh("operand")
        test: cst.BaseExpression = cst.Name(result)
        if isinstance(node.operator, cst.Or):
            test = cst.UnaryOperation(cst.Not(), test)
        return result, [self.line(result, node.left), self.if_(test, [self.line(result, node.right)])]

    def chain(self, node: cst.Comparison) -> tuple[str, Block]:
        """``a < b < c`` as Python runs it: ``b`` once, ``b < c`` only where ``a < b`` holds."""
        result = self.fresh("chain")
        before: Block = []
        left, tests = node.left, []
        for position, target in enumerate(node.comparisons):
            right = target.comparator
            if position < len(node.comparisons) - 1 and not isinstance(right, (cst.Name, cst.BaseNumber)):
                middle = self.fresh("operand")
                before.append(self.line(middle, right))
                right = cst.Name(middle)
            tests.append(cst.Comparison(left, [target.with_changes(comparator=right)]))
            left = right
        body: Block = []
        for test in reversed(tests[1:]):
            body = [self.line(result, test), *([self.if_(cst.Name(result), body)] if body else [])]
        return result, [*before, self.line(result, tests[0]), self.if_(cst.Name(result), body)]

    def switch(self, chooser: cst.Call | cst.Subscript, found: Members) -> tuple[str, Block]:
        """One branch per member: the member (or the call of it) in place of the chosen one."""
        result = self.fresh("chosen")
        before: Block = []
        key = found.key
        if not isinstance(key, cst.Name):
            name = self.fresh("key")
            before.append(self.line(name, key))
            key = cst.Name(name)

        def make(term: cst.BaseExpression) -> cst.BaseStatement:
            return self.line(result, chooser.with_changes(func=term) if isinstance(chooser, cst.Call) else term)

        options = [(found.test(key, member), member.term) for member in found.members]
        return result, [*before, *self.per_option(options, found.raise_missing(key), make)]

    def per_option(self, options: Sequence[Option], missing: cst.Raise,
                   make: Callable[[cst.BaseExpression], cst.BaseStatement]) -> Block:
        """``if test: make(term)`` / ``else: ...`` for each option, then ``missing``."""
        orelse: Block = [set_location(cst.SimpleStatementLine([missing]), comment_of(self.like))]
        for test, term in reversed(options):
            orelse = [self.if_(test, [make(term)], orelse)]
        return orelse

    def extreme(self, sequence: cst.BaseExpression, key: cst.BaseExpression, length: int,
                largest: bool) -> tuple[str, Block]:
        """``max(seq, key=f)`` as Python runs it: the first item whose key no later item beats
        (``f`` a lambda: its body with the item for its parameter, ``applied``)."""
        beats = cst.GreaterThan() if largest else cst.LessThan()
        items, best, best_key = self.fresh("items"), self.fresh("best"), self.fresh("best_key")

        def item(i: int) -> cst.Subscript:
            return cst.Subscript(cst.Name(items), [cst.SubscriptElement(cst.Index(cst.Integer(str(i))))])

        statements: Block = [self.line(items, sequence), self.line(best, item(0)),
                             self.line(best_key, applied(key, cst.Name(best)))]
        for i in range(1, length):
            score = self.fresh("score")
            statements.append(self.line(score, applied(key, item(i))))
            test = cst.Comparison(cst.Name(score), [cst.ComparisonTarget(beats, cst.Name(best_key))])
            statements.append(self.if_(test, [self.line(best, item(i)), self.line(best_key, cst.Name(score))]))
        return best, statements

    def sorted_by_key(self, sequence: cst.BaseExpression, key: cst.BaseExpression, length: int,
                      reverse: cst.BaseExpression | None) -> tuple[str, Block]:
        """``sorted(seq, key=f)`` as Python runs it: each item's key computed once, in order, then
        the items' positions sorted by those keys on the host (``sorted(range(n), key=keys.__getitem__)``
        makes the comparisons ``sorted(seq, key=f)`` makes, so it gives the same order, ties and
        ``reverse=`` included), and the list of the items in that order."""
        items, keys, order, result = (self.fresh(stem) for stem in ("items", "keys", "order", "ordered"))
        scores = [self.fresh("score") for _ in range(length)]
        statements: Block = [self.line(items, sequence)]
        statements += [self.line(score, applied(key, _item(cst.Name(items), _integer(i))))
                       for i, score in enumerate(scores)]
        statements.append(self.line(keys, cst.Tuple([cst.Element(cst.Name(score)) for score in scores])))
        arguments = [cst.Arg(cst.Call(cst.Name("range"), [cst.Arg(_integer(length))])),
                     cst.Arg(cst.Attribute(cst.Name(keys), cst.Name("__getitem__")), keyword=cst.Name("key"),
                             equal=_KEYWORD)]
        if reverse is not None:
            arguments.append(cst.Arg(reverse, keyword=cst.Name("reverse"), equal=_KEYWORD))
        statements.append(self.line(order, cst.Call(cst.Name("sorted"), arguments)))
        ordered = [cst.Element(_item(cst.Name(items), _item(cst.Name(order), _integer(i)))) for i in range(length)]
        statements.append(self.line(result, cst.List(ordered)))
        return result, statements

    def extreme_of_items(self, values: Sequence[cst.BaseExpression], largest: bool) -> tuple[str, Block]:
        """``max(a, b, ...)`` as CPython runs it: every argument evaluated once, in order, then
        ``item > best`` (``<`` for ``min``) per later item; the first of equal items wins."""
        beats = cst.GreaterThan() if largest else cst.LessThan()
        items = [self.fresh("item") for _ in values]
        statements: Block = [self.line(name, value) for name, value in zip(items, values)]
        best = self.fresh("best")
        statements.append(self.line(best, cst.Name(items[0])))
        for name in items[1:]:
            test = cst.Comparison(cst.Name(name), [cst.ComparisonTarget(beats, cst.Name(best))])
            statements.append(self.if_(test, [self.line(best, cst.Name(name))]))
        return best, statements


def applied(function: cst.BaseExpression, argument: cst.BaseExpression) -> cst.BaseExpression:
    """``function(argument)``; for a lambda of one plain parameter (``key=lambda t: t.sum()``), its
    body with ``argument`` for the parameter — the value the call gives: the argument is a name or
    an item of one (pure), read where the parameter is read."""
    if isinstance(function, cst.Lambda) and lambda_of_one(function):
        parameter = function.params.params[0].name.value
        return replace_names(function.body, lambda name: argument if name == parameter else None)
    return cst.Call(function, [cst.Arg(argument)])


def _item(value: cst.BaseExpression, index: cst.BaseExpression) -> cst.Subscript:
    return cst.Subscript(value, [cst.SubscriptElement(cst.Index(index))])


def _integer(value: int) -> cst.Integer:
    return cst.Integer(str(value))


def lambda_of_one(function: cst.Lambda) -> bool:
    """A lambda of exactly one plain parameter, without a default, ``*`` or ``**``."""
    params = function.params
    return (len(params.params) == 1 and params.params[0].default is None and not params.posonly_params
            and not params.kwonly_params and isinstance(params.star_arg, cst.MaybeSentinel | type(None))
            and params.star_kwarg is None)


def _unparenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node
