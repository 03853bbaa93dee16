"""The program tree the fuzzer generates and shrinks, and its rendering to Python source.

A :class:`Program` describes one ``nn.Module`` class (plus, optionally, a small
``Gate`` submodule class defined in the same file). Bodies are lists of
statements: :class:`Line` (one simple statement, kept as text), :class:`If`
(with ``elif`` tests and an optional ``else``), :class:`For` and :class:`While`.
Statement text may contain ``{L}``, replaced by the length of ``self.layers``
when rendering, so that the shrinker can drop layers without rewriting indices.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

INDENT = "    "


@dataclass
class Line:
    """One simple statement (assignment, call, ``break``, ``return x * 0.5``).

    An early return of ``forward`` has ``returns`` set instead: the expression that
    replaces the first returned value; the rest follow the program's return kinds.
    """

    text: str = ""
    returns: str | None = None


@dataclass
class If:
    """``if tests[0]: bodies[0]`` / ``elif tests[i]: bodies[i]`` / ``else: orelse`` (when not None)."""

    tests: list[str]
    bodies: list[list[Stmt]]
    orelse: list[Stmt] | None = None


@dataclass
class For:
    """``for`` over ``range(trips)`` (kind "range"), ``self.layers`` (kind "layers"),
    ``enumerate(self.layers)`` (kind "enumerate", target ``"j, layer"``) or ``self.gates`` (kind "gates")."""

    target: str
    kind: str
    body: list[Stmt]
    trips: int = 0


@dataclass
class While:
    """``counter = 0; while counter < bound: ...`` with the increment first or last in the body."""

    counter: str
    bound: int
    body: list[Stmt]
    increment_first: bool = False


Stmt = Line | If | For | While


@dataclass
class Helper:
    """A method ``def name(self, x, k): body; return x`` called with a static int ``k``."""

    name: str
    body: list[Stmt]


@dataclass
class Program:
    """One generated model class and everything needed to build it and its inputs."""

    name: str
    seed: int
    width: int
    scale: float
    layer_kinds: list[str]
    n_fc: int
    flag: bool | None  # None: no self.flag attribute (the shrinker drops unused attributes)
    limit: int | None
    body: list[Stmt]
    returns: list[str]
    helpers: list[Helper] = field(default_factory=list)
    gate_body: list[Stmt] | None = None
    n_gates: int = 0

    def copy(self) -> Program:
        return copy.deepcopy(self)


LAYER_SOURCE = {
    "linear": "nn.Linear({w}, {w})",
    "tanh": "nn.Tanh()",
    "relu": "nn.ReLU()",
    "sigmoid": "nn.Sigmoid()",
    "seq": "nn.Sequential(nn.Linear({w}, {w}), nn.Tanh())",
}

RETURN_SOURCE = {
    "x": "x",
    "h": "h",
    "n": "n",
    "len": "len(outs)",
    "last": "outs[-1]",
    "item": "x.sum().item()",
    "outs": "outs",
}


def return_text(returns: list[str], first: str | None = None) -> str:
    """``return a, b, ...`` for the element kinds ``returns``; ``first`` replaces the first element."""
    parts = [RETURN_SOURCE[kind] for kind in returns]
    if first is not None:
        parts[0] = first
    return "return " + ", ".join(parts)


def render_block(body: list[Stmt], depth: int, n_layers: int, returns: list[str] | None = None) -> list[str]:
    """Source lines of ``body`` indented ``depth`` levels (``pass`` for an empty body);
    ``returns`` are the return kinds of the enclosing ``forward``."""
    pad = INDENT * depth
    if not body:
        return [pad + "pass"]
    lines: list[str] = []
    for stmt in body:
        if isinstance(stmt, Line):
            text = return_text(returns or ["x"], stmt.returns) if stmt.returns is not None else stmt.text
            lines.append(pad + text.replace("{L}", str(n_layers)))
        elif isinstance(stmt, If):
            for i, (test, branch) in enumerate(zip(stmt.tests, stmt.bodies)):
                keyword = "if" if i == 0 else "elif"
                lines.append(f"{pad}{keyword} {test.replace('{L}', str(n_layers))}:")
                lines += render_block(branch, depth + 1, n_layers, returns)
            if stmt.orelse is not None:
                lines.append(pad + "else:")
                lines += render_block(stmt.orelse, depth + 1, n_layers, returns)
        elif isinstance(stmt, For):
            iterable = {"range": f"range({stmt.trips})", "layers": "self.layers",
                        "enumerate": "enumerate(self.layers)", "gates": "self.gates"}[stmt.kind]
            lines.append(f"{pad}for {stmt.target} in {iterable}:")
            lines += render_block(stmt.body, depth + 1, n_layers, returns)
        elif isinstance(stmt, While):
            increment = f"{pad}{INDENT}{stmt.counter} += 1"
            lines.append(f"{pad}{stmt.counter} = 0")
            lines.append(f"{pad}while {stmt.counter} < {stmt.bound}:")
            if stmt.increment_first:
                lines.append(increment)
            lines += render_block(stmt.body, depth + 1, n_layers, returns)
            if not stmt.increment_first:
                lines.append(increment)
        else:  # pragma: no cover - the tree only holds the four kinds
            raise TypeError(f"not a statement: {stmt!r}")
    return lines


def render_classes(program: Program) -> str:
    """The source of the Gate class (if any) and the model class, without imports."""
    w = program.width
    n_layers = len(program.layer_kinds)
    out: list[str] = []
    if program.gate_body is not None:
        out += ["class Gate(nn.Module):",
                "    def __init__(self, width):",
                "        super().__init__()",
                "        self.fc = nn.Linear(width, width)",
                "",
                "    def forward(self, x):",
                "        y = self.fc(x)"]
        out += render_block(program.gate_body, 2, n_layers)
        out += ["        return x", "", ""]
    out += [f"class {program.name}(nn.Module):",
            "    def __init__(self):",
            "        super().__init__()"]
    if program.flag is not None:
        out.append(f"        self.flag = {program.flag}")
    if program.limit is not None:
        out.append(f"        self.limit = {program.limit}")
    if program.layer_kinds:
        layers = [LAYER_SOURCE[kind].format(w=w) for kind in program.layer_kinds]
        one_line = f"        self.layers = nn.ModuleList([{', '.join(layers)}])"
        if len(one_line) <= 100:
            out.append(one_line)
        else:
            out.append("        self.layers = nn.ModuleList([")
            out += [f"            {layer}," for layer in layers]
            out.append("        ])")
    for j in range(program.n_fc):
        out.append(f"        self.fc{j} = nn.Linear({w}, {w})")
    if program.gate_body is not None and program.n_gates:
        out.append(f"        self.gates = nn.ModuleList([Gate({w}) for _ in range({program.n_gates})])")
    for helper in program.helpers:
        out += ["", f"    def {helper.name}(self, x, k):"]
        out += render_block(helper.body, 2, n_layers)
        out.append("        return x")
    out += ["", "    def forward(self, x):"]
    out += render_block(program.body, 2, n_layers, program.returns)
    out.append("        " + return_text(program.returns))
    return "\n".join(out) + "\n"


def render_module(program: Program) -> str:
    """A complete importable module: imports, the classes, and the input constants."""
    header = [f'"""dycl fuzz program {program.name} (seed {program.seed})."""', "",
              "import torch", "from torch import nn", "", "", ""]
    footer = ["", "", f"WIDTH = {program.width}", f"SCALE = {program.scale}", f"SEED = {program.seed}", ""]
    return "\n".join(header) + render_classes(program) + "\n".join(footer)


def count_lines(program: Program) -> int:
    """Non-blank source lines of the rendered classes (the program's size)."""
    return sum(1 for line in render_classes(program).splitlines() if line.strip())


def walk_blocks(program: Program):
    """Every statement list of the program (the forward body, helper and gate bodies, nested bodies)."""
    roots = [program.body] + [h.body for h in program.helpers]
    if program.gate_body is not None:
        roots.append(program.gate_body)
    stack = list(roots)
    while stack:
        block = stack.pop(0)
        yield block
        for stmt in block:
            if isinstance(stmt, If):
                stack += stmt.bodies
                if stmt.orelse is not None:
                    stack.append(stmt.orelse)
            elif isinstance(stmt, (For, While)):
                stack.append(stmt.body)
