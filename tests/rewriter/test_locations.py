"""annotate_locations: golden snippets for every kind of statement, and agreement with
the transformer it replaced (libcst's PositionProvider over the whole tree, kept here
as the reference) on every function of the project and the forwards of torch.nn."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import pytest
import torch.nn.modules
from dycl.rewriter.locations import (
    LocationTable,
    StructureMismatch,
    _with_comment,
    annotate_locations,
    location_comment,
    set_location,
)
from dycl.rewriter.source import parse_function
from libcst.metadata import MetadataWrapper, PositionProvider

ROOT = Path(__file__).resolve().parents[2]


class _Reference(cst.CSTTransformer):
    """The implementation ``annotate_locations`` replaced, verbatim in behaviour."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, label: str, first_line: int) -> None:
        super().__init__()
        self.label = label
        self.offset = first_line - 1

    def _comment(self, original):
        line = self.get_metadata(PositionProvider, original).start.line + self.offset
        return location_comment(self.label, line)

    def leave_EmptyLine(self, original, updated):
        return cst.RemoveFromParent()

    def leave_TrailingWhitespace(self, original, updated):
        return _with_comment(updated, None)

    def leave_SimpleStatementLine(self, original, updated):
        comment = self._comment(original)
        lines = [cst.SimpleStatementLine([small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
                 for small in updated.body]
        lines = [set_location(line, comment) for line in lines]
        return lines[0] if len(lines) == 1 else cst.FlattenSentinel(lines)

    def leave_SimpleStatementSuite(self, original, updated):
        comment = self._comment(original)
        lines = [set_location(cst.SimpleStatementLine([s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]),
                              comment) for s in updated.body]
        return cst.IndentedBlock(body=lines)

    def _leave_compound(self, original, updated):
        return set_location(updated, self._comment(original))

    leave_If = leave_For = leave_While = leave_With = leave_Try = _leave_compound
    leave_FunctionDef = leave_ClassDef = _leave_compound


def reference(source: str, label: str, first_line: int, module: cst.Module | None = None) -> str:
    module = cst.parse_module(source) if module is None else module
    return MetadataWrapper(module).visit(_Reference(label, first_line)).code  # on a deep copy


def annotated(source: str, label: str = "f.py", first_line: int = 1, module: cst.Module | None = None) -> str:
    module = cst.parse_module(source) if module is None else module
    return annotate_locations(module, source, label, first_line).code


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    expected: str

    def __post_init__(self) -> None:  # r-strings open with a newline; <ws> is trailing whitespace
        object.__setattr__(self, "source", self.source.removeprefix("\n").replace("<ws>", "   "))
        object.__setattr__(self, "expected", self.expected.removeprefix("\n"))


CASES = [
    Case('simple_lines', r'''
def f(self, x):  # header comment

    # a comment line
    a = 1; b = 2  # two statements
    c = 3;
    x += a<ws>
    y: int = b
    del a, b ;  z = c


    return x  # the end
    # a footer comment
''', r'''
def f(self, x):  # f.py:1
    a = 1  # f.py:4
    b = 2  # f.py:4
    c = 3  # f.py:5
    x += a  # f.py:6
    y: int = b  # f.py:7
    del a, b  # f.py:8
    z = c  # f.py:8
    return x  # f.py:11
'''),
    Case('multi_line_statements', r'''
def f(self, x):
    y = torch.cat([x,   # first
                   # a comment line inside

                   x],<ws>
                  dim=1)
    z = (y
         + 1)  # trailing
    w = x \
        + 1
    s = """text
# not a comment

  kept"""
    g = [v  # each
         for v in (x, y)  # comment
         if v is not None]
    h = lambda v: (v +  # inside a lambda
                   1)
    return foo(a=1,
               b=2)
''', r'''
def f(self, x):  # f.py:1
    y = torch.cat([x,
                   x],
                  dim=1)  # f.py:2
    z = (y
         + 1)  # f.py:7
    w = x \
        + 1  # f.py:9
    s = """text
# not a comment

  kept"""  # f.py:11
    g = [v
         for v in (x, y)
         if v is not None]  # f.py:15
    h = lambda v: (v +
                   1)  # f.py:18
    return foo(a=1,
               b=2)  # f.py:20
'''),
    Case('if_elif_else', r'''
def f(x):
    if x > 0:  # positive
        y = 1
    # before elif
    elif x < 0: y = -1; z = 2  # suite
    # before else

    else:
        # inside else
        y = 0
    if x: return 1
    else: return 2
''', r'''
def f(x):  # f.py:1
    if x > 0:  # f.py:2
        y = 1  # f.py:3
    elif x < 0:  # f.py:5
        y = -1  # f.py:5
        z = 2  # f.py:5
    else:
        y = 0  # f.py:10
    if x:  # f.py:11
        return 1  # f.py:11
    else:
        return 2  # f.py:12
'''),
    Case('else_if_is_not_elif', r'''
def f(x):
    if x:
        pass
    else:
        if x > 1:
            pass
        else:  # comment
            return 3
''', r'''
def f(x):  # f.py:1
    if x:  # f.py:2
        pass  # f.py:3
    else:
        if x > 1:  # f.py:5
            pass  # f.py:6
        else:
            return 3  # f.py:8
'''),
    Case('loops', r'''
async def f(xs):
    for i, x in enumerate(xs):  # loop
        if i: continue
        break
    # before else
    else:
        pass
    while xs: xs = xs[1:]
    else: return 0
    async for x in xs:
        pass
    async with ctx() as c, other(  # comment in with
            1) as d:
        pass
''', r'''
async def f(xs):  # f.py:1
    for i, x in enumerate(xs):  # f.py:2
        if i:  # f.py:3
            continue  # f.py:3
        break  # f.py:4
    else:
        pass  # f.py:7
    while xs:  # f.py:8
        xs = xs[1:]  # f.py:8
    else:
        return 0  # f.py:9
    async for x in xs:  # f.py:10
        pass  # f.py:11
    async with ctx() as c, other(
            1) as d:  # f.py:12
        pass  # f.py:14
'''),
    Case('with_parenthesized', r'''
def f(x):
    with (
        open("a") as a,  # first
        # between

        open("b") as b,
    ):
        pass
    with ctx(): y = 1
''', r'''
def f(x):  # f.py:1
    with (
        open("a") as a,
        open("b") as b,
    ):  # f.py:2
        pass  # f.py:8
    with ctx():  # f.py:9
        y = 1  # f.py:9
'''),
    Case('try_except_else_finally', r'''
def f(x):
    try:  # try
        y = 1
    # before except
    except (ValueError,  # value
            TypeError) as e:
        y = 2
    except KeyError: y = 3
    except:
        raise
    # before else
    else: z = 1; w = 2
    # before finally
    finally:
        pass
    try: pass
    finally: return 1
''', r'''
def f(x):  # f.py:1
    try:  # f.py:2
        y = 1  # f.py:3
    except (ValueError,
            TypeError) as e:
        y = 2  # f.py:7
    except KeyError:
        y = 3  # f.py:8
    except:
        raise  # f.py:10
    else:
        z = 1  # f.py:12
        w = 2  # f.py:12
    finally:
        pass  # f.py:15
    try:  # f.py:16
        pass  # f.py:16
    finally:
        return 1  # f.py:17
'''),
    Case('try_star', r'''
def f(x):
    try:
        y = 1
    except* ValueError:  # star
        y = 2
    except* (TypeError,
             # comment
             KeyError): y = 3
    else:
        pass
    finally: z = 0
''', r'''
def f(x):  # f.py:1
    try:
        y = 1  # f.py:3
    except* ValueError:
        y = 2  # f.py:5
    except* (TypeError,
             KeyError):
        y = 3  # f.py:8
    else:
        pass  # f.py:10
    finally:
        z = 0  # f.py:11
'''),
    Case('nested_defs_and_classes', r'''
@decorator  # first decorator
# between decorators

@other(1,  # argument
       2)
# after decorators
def f(self,  # self
      x: int,
      # comment line in the signature

      y=(1,
         2),
      ) -> int:  # returns
    @staticmethod
    def g(a): return a
    class C(Base,  # base
            metaclass=M):
        """Doc."""
        # comment
        attr = 1
        def m(self): pass
    @dataclass
    class D: x: int = 0
    def h():
        # only a comment, then
        nonlocal y
        global z
        return y
    return g(x)
''', r'''
@decorator
@other(1,
       2)
def f(self,
      x: int,
      y=(1,
         2),
      ) -> int:  # f.py:7
    @staticmethod
    def g(a):  # f.py:15
        return a  # f.py:15
    class C(Base,
            metaclass=M):  # f.py:16
        """Doc."""  # f.py:18
        attr = 1  # f.py:20
        def m(self):  # f.py:21
            pass  # f.py:21
    @dataclass
    class D:  # f.py:23
        x: int = 0  # f.py:23
    def h():  # f.py:24
        nonlocal y  # f.py:26
        global z  # f.py:27
        return y  # f.py:28
    return g(x)  # f.py:29
'''),
    Case('match', r'''
def f(cmd):
    match cmd:  # match
        # before case
        case [x, y,  # pattern
              z]:
            return x
        case {"k": v} if v > 0: return v
        case Point(x=0,
                   # comment
                   y=0) if (cmd and  # guard
                            cmd): pass
        case _:
            pass
''', r'''
def f(cmd):  # f.py:1
    match cmd:
        case [x, y,
              z]:
            return x  # f.py:6
        case {"k": v} if v > 0:
            return v  # f.py:7
        case Point(x=0,
                   y=0) if (cmd and
                            cmd):
            pass  # f.py:11
        case _:
            pass  # f.py:13
'''),
    Case('headers_over_lines', r'''
def f(x):
    if (x and  # a comment in the test
            x):
        pass
    if (x
    ):
        pass
    while (x or
           x): break
    for a in (
        x  # iterable
    ): pass
    if x == "#":
        # comment after a header holding a string
        pass
    if x == (
        "#"):
        pass
    if x:
        # comment lines after a one-line header

        # another
        pass
    elif (x  # in elif
          ): pass
''', r'''
def f(x):  # f.py:1
    if (x and
            x):  # f.py:2
        pass  # f.py:4
    if (x
    ):  # f.py:5
        pass  # f.py:7
    while (x or
           x):  # f.py:8
        break  # f.py:9
    for a in (
        x
    ):  # f.py:10
        pass  # f.py:12
    if x == "#":  # f.py:13
        pass  # f.py:15
    if x == (
        "#"):  # f.py:16
        pass  # f.py:18
    if x:  # f.py:19
        pass  # f.py:23
    elif (x
          ):  # f.py:24
        pass  # f.py:25
'''),
    Case('imports_and_small_statements', r'''
def f(x):
    import os, sys  # imports
    from a import (b,  # b
                   c)
    from . import d
    assert x, (  # message
        "message")
    raise ValueError(  # raise
        "no")
''', r'''
def f(x):  # f.py:1
    import os, sys  # f.py:2
    from a import (b,
                   c)  # f.py:3
    from . import d  # f.py:5
    assert x, (
        "message")  # f.py:6
    raise ValueError(
        "no")  # f.py:8
'''),
    Case('one_line_function', r'''
def f(x): y = x; return y  # all on one line
''', r'''
def f(x):  # f.py:1
    y = x  # f.py:1
    return y  # f.py:1
'''),
    Case('docstring_only', r'''
def f(x):
    """A docstring
    # with a hash

    and a blank line."""
''', r'''
def f(x):  # f.py:1
    """A docstring
    # with a hash

    and a blank line."""  # f.py:2
'''),

]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_golden(case: Case) -> None:
    assert annotated(case.source) == case.expected
    assert reference(case.source, "f.py", 1) == case.expected


def test_lines_count_from_first_line_and_newlines_of_every_kind() -> None:
    source = "def f(x):\r\n    y = (x,  # c\r\n         x)\r\n\r\n    return y\r\n"
    assert annotated(source, "m.py", 40) == reference(source, "m.py", 40)
    assert annotated(source, "m.py", 40).split("\r\n")[2:4] == ["         x)  # m.py:41", "    return y  # m.py:44"]
    feed = "def f(x):\n    \x0c\n    y = 1\n\x0c    return (y,\n  # c\n  y)\n"
    assert annotated(feed) == reference(feed, "f.py", 1)


def test_no_second_warning_for_an_invalid_escape() -> None:
    source = 'def f(x):\n    s = "\\d" + b"\\q\\\n" + r"\\w" + "\\\\"  # \\d\n    return (s,  # c\n  "\\d")\n'
    assert "\\d" in source
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert annotated(source) == reference(source, "f.py", 1)
    assert annotated(source).endswith('  "\\d")  # f.py:4\n')


def test_disagreeing_structures_are_an_internal_error() -> None:
    module = cst.parse_module("def f(x):\n    if x:\n        return 1\n")
    with pytest.raises(StructureMismatch, match="disagree at line 2"):
        annotate_locations(module, "def f(x):\n    for x in x:\n        return 1\n", "f.py", 1)
    with pytest.raises(StructureMismatch):
        annotate_locations(module, "def f(x):\n    if x:\n        return 1\n    pass\n", "f.py", 1)
    with pytest.raises(StructureMismatch):
        annotate_locations(module, "def f(x):\n    if x:\n        x = 1; return 1\n", "f.py", 1)
    assert issubclass(StructureMismatch, AssertionError)


def _stamped(x):
    # a comment
    y = (x,  # inside
         x); z = y  # noqa: E702

    if x: return z  # noqa: E701
    return y


def test_parse_function_stamps_the_file_lines() -> None:
    locations = LocationTable()
    parsed = parse_function(_stamped, locations)
    lines, first = inspect.getsourcelines(_stamped)
    text = "".join(lines)
    assert cst.Module([parsed.definition]).code == annotated(text, locations.label_for(__file__), first)
    found = [locations.resolve(stmt) for stmt in parsed.definition.body.body]
    assert [location.line - first for location in found] == [2, 2, 5, 6]
    assert {location.path for location in found} == {__file__}


def _functions_in(path: Path):
    """(first line, dedented source) of every function in ``path``, nested ones included."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            yield first, textwrap.dedent("".join(lines[first - 1:node.end_lineno]))


def _torch_forwards():
    """(first line, dedented source) of every ``forward`` defined in torch/nn/modules/*.py."""
    for info in pkgutil.iter_modules(torch.nn.modules.__path__):
        module = importlib.import_module(f"torch.nn.modules.{info.name}")
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == module.__name__ and "forward" in vars(cls):
                lines, first = inspect.getsourcelines(cls.forward)
                yield first, textwrap.dedent("".join(lines))


# every second function of the corpus (~1,100 of ~2,200, from every file) in the default run, all of
# them with `make test-slow` (~27 s on 2 cores)
@pytest.mark.parametrize("stride", [2, pytest.param(1, marks=pytest.mark.slow)])
def test_agrees_with_the_reference_on_real_code(stride: int) -> None:
    paths = [*ROOT.glob("models/*.py"), ROOT / "tests" / "nets.py", *ROOT.glob("dycl/**/*.py"),
             *ROOT.glob("rewriter/*.py")]
    corpus = ([source for path in paths for source in _functions_in(path)] + list(_torch_forwards()))[::stride]
    differ = [source for first, source, module in ((*each, cst.parse_module(each[1])) for each in corpus)
              if annotated(source, "f.py", first, module) != reference(source, "f.py", first, module)]
    assert differ == []
    assert len(corpus) > 300
