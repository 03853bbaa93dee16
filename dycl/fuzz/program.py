"""The program tree the fuzzer generates and shrinks, and its rendering to Python source.

A :class:`Program` describes one ``nn.Module`` class (plus, optionally, a small
``Gate`` submodule class defined in the same file, user decorators, and plain
functions that :func:`render_library` puts in a separate module imported as a
library). Bodies are lists of statements: :class:`Line` (simple statements kept
as text, one per line of the text), :class:`If` (with ``elif`` tests and an
optional ``else``), :class:`For` and :class:`While`. Statement text may contain
``{L}``, replaced by the length of ``self.layers`` when rendering, so that the
shrinker can drop layers without rewriting indices.
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
    """A method ``def name(self, x, k): body; return x`` called with a static int ``k`` (also used
    for library functions ``def name(x, k)``). ``kwargs`` adds ``**kwargs`` to the signature
    (callers may pass ``scale=``); ``decorator`` names a user decorator (see ``DECORATOR_SOURCE``)."""

    name: str
    body: list[Stmt]
    kwargs: bool = False
    decorator: str | None = None


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
    gate_inner: list[Stmt] | None = None  # Gate._inner(x, k), called from a loop in the gate's forward
    gate_kwargs: bool = False  # the gate's forward takes **kwargs
    gate_swap: bool = False  # Gate.__init__ sets self.forward = self._route (the class forward is a decoy)
    swap_forward: bool = False  # __init__ sets self.forward = self._infer (the class forward is a decoy)
    train: bool = False  # the model is left in train mode
    library: list[Helper] = field(default_factory=list)  # functions of a separate, library-like module
    buffers: dict[str, str] = field(default_factory=dict)  # buffer name -> "scalar" | "vector"
    attributes: dict[str, str] = field(default_factory=dict)  # plain attribute (a container) -> its source
    init_lines: list[str] = field(default_factory=list)  # last lines of __init__ (heads, hooks: issue 26)
    batch_sizes: tuple[int, ...] = (1,)  # the inputs' batch sizes in turn; the first is the compile example's
    module_lines: list[str] = field(default_factory=list)  # module-level definitions (an Enum, a base class: issue 27)
    methods: list[str] = field(default_factory=list)  # extra methods' lines, indented as members (issue 27)
    base: str = "nn.Module"  # the model's base class
    forward_decorator: str | None = None  # a decorator (defined in module_lines) of the root forward

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
    "vals": "len(vals)",
}

BUFFER_SOURCE = {"scalar": "torch.zeros(1)", "vector": "torch.zeros({w})"}

# user decorators that change the result; functools.wraps makes inspect.unwrap find the undecorated method
DECORATOR_SOURCE = {
    "halve": ["def halve(fn):",
              "    @functools.wraps(fn)",
              "    def wrapper(*args, **kwargs):",
              "        return fn(*args, **kwargs) * 0.5",
              "    return wrapper"],
    "squash": ["def squash(fn):",
               "    @functools.wraps(fn)",
               "    def wrapper(self, x, *args, **kwargs):",
               "        return torch.tanh(fn(self, x, *args, **kwargs)) + 0.1",
               "    return wrapper"],
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
            lines += [pad + part.replace("{L}", str(n_layers)) for part in text.split("\n")]
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


def _function(header: str, function: Helper, n_layers: int, indent: int) -> list[str]:
    """``def`` of a helper, library function or the gate's inner helper, ending in ``return x``."""
    pad = INDENT * indent
    out = [f"{pad}@{function.decorator}"] if function.decorator else []
    out.append(f"{pad}def {function.name}({header}{', **kwargs' if function.kwargs else ''}):")
    out += render_block(function.body, indent + 1, n_layers)
    out.append(f"{pad}{INDENT}return x")
    return out


def render_library(program: Program) -> str:
    """The functions of the program's library module, without imports."""
    n_layers = len(program.layer_kinds)
    out: list[str] = []
    for function in program.library:
        out += _function("x, k", function, n_layers, 0) + ["", ""]
    return "\n".join(out)


def _render_gate(program: Program, n_layers: int) -> list[str]:
    forward = "_route" if program.gate_swap else "forward"
    out = ["class Gate(nn.Module):",
           "    def __init__(self, width):",
           "        super().__init__()",
           "        self.fc = nn.Linear(width, width)"]
    if program.gate_swap:
        out += ["        self.forward = self._route", "", "    def forward(self, x):", "        return torch.tanh(x)"]
    out += ["", f"    def {forward}(self, x{', **kwargs' if program.gate_kwargs else ''}):", "        y = self.fc(x)"]
    if program.gate_kwargs:
        out.append('        y = y * kwargs.get("scale", 1.0)')
    out += render_block(program.gate_body or [], 2, n_layers)
    out.append("        return x")
    if program.gate_inner is not None:
        out += [""] + _function("self, x, k", Helper("_inner", program.gate_inner), n_layers, 1)
    return out + ["", ""]


def render_classes(program: Program, with_library: bool = True) -> str:
    """The source of the decorators, the library functions (unless ``with_library`` is false: they
    are then imported from their own module), the Gate class (if any) and the model class, without imports."""
    w = program.width
    n_layers = len(program.layer_kinds)
    out: list[str] = list(program.module_lines)
    for name in sorted({h.decorator for h in program.helpers if h.decorator}):
        out += DECORATOR_SOURCE[name] + ["", ""]
    if with_library and program.library:
        out += ["# (the fuzzer generated these functions as a separate module imported as a library)"]
        out += render_library(program).splitlines()
    if program.gate_body is not None:
        out += _render_gate(program, n_layers)
    out += [f"class {program.name}({program.base}):",
            "    def __init__(self):",
            "        super().__init__()"]
    if program.flag is not None:
        out.append(f"        self.flag = {program.flag}")
    if program.limit is not None:
        out.append(f"        self.limit = {program.limit}")
    for name, source in program.attributes.items():
        out.append(f"        self.{name} = {source}")
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
    for name, kind in program.buffers.items():
        out.append(f'        self.register_buffer("{name}", {BUFFER_SOURCE[kind].format(w=w)})')
    out += [f"        {line}" for line in program.init_lines]
    if program.swap_forward:
        out.append("        self.forward = self._infer")
    for helper in program.helpers:
        out += [""] + _function("self, x, k", helper, n_layers, 1)
    out += program.methods
    if program.swap_forward:
        out += ["", "    def forward(self, x):", "        return self._infer(x * 0.5)"]
    out.append("")
    if program.forward_decorator:
        out.append(f"    @{program.forward_decorator}")
    out.append(f"    def {'_infer' if program.swap_forward else 'forward'}(self, x):")
    out += render_block(program.body, 2, n_layers, program.returns)
    out.append("        " + return_text(program.returns))
    return "\n".join(out) + "\n"


def render_module(program: Program, library_module: str | None = None) -> str:
    """A complete importable module: imports, the classes, and the input constants; the library
    functions are imported from ``library_module`` when it is given (else defined in the module)."""
    header = [f'"""dycl fuzz program {program.name} (seed {program.seed})."""', "",
              "import functools", "", "import torch", "from torch import nn", ""]
    if library_module and program.library:
        header.append(f"from {library_module} import {', '.join(f.name for f in program.library)}")
    header += ["", ""]
    footer = ["", "", f"WIDTH = {program.width}", f"SCALE = {program.scale}", f"SEED = {program.seed}", ""]
    return "\n".join(header) + render_classes(program, not library_module) + "\n".join(footer)


def library_source(program: Program) -> str:
    """A complete module holding the program's library functions."""
    return ("\n".join([f'"""Library functions of dycl fuzz program {program.name}."""', "", "import torch", "", ""])
            + render_library(program))


def count_lines(program: Program) -> int:
    """Non-blank source lines of the rendered classes (the program's size)."""
    return sum(1 for line in render_classes(program).splitlines() if line.strip())


def walk_blocks(program: Program):
    """Every statement list of the program (the forward body, helper and gate bodies, nested bodies)."""
    roots = [program.body] + [h.body for h in program.helpers] + [f.body for f in program.library]
    if program.gate_body is not None:
        roots.append(program.gate_body)
    if program.gate_inner is not None:
        roots.append(program.gate_inner)
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
