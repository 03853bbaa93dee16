"""The manifest of a dycl artifact: one typed description that dycl writes and
every loader (dycl's and each generated host's) reads.

``Manifest.from_json`` assumes nothing about its input: it takes the parsed JSON
of ``manifest.json`` and raises ``ArtifactError`` naming the first field that
does not fit the schema and what was expected there (``manifest.json:
sub_dnns.subdnn_1.sha256: expected 64 lowercase hex digits, got ...``); a
manifest of another schema version is refused before any other field is read.
Guarantees, for a ``Manifest`` it returns: every file entry is a string with a
64-digit lowercase hex checksum, the host file is ``host.py``, every dtype is in
``DTYPE_SIZES``, every dim is a non-negative integer or (in ports) a symbol
name. ``to_json`` writes the same document back: ``Manifest.from_json(m.to_json())
== m``. File *names* are only checked to be strings here; that they are plain
names inside the artifact is checked where files are opened (``artifact_check``).

A new field goes in four places: its dataclass, ``from_json``, ``to_json`` and
(top level) ``_MANIFEST_OPTIONAL``; ``SCHEMA_VERSION`` goes up when a loader of
the previous version would misread a manifest that has it.

The source of this module is copied verbatim into every generated ``host.py``
(which must not import dycl), ahead of ``artifact_check.py``, and dycl imports
it: one implementation for both. Hence: standard library only, no
``__future__`` import, and code that receives a manifest reads it by attribute,
never with ``isinstance`` (the host's copy defines classes of its own).
"""

import ast
import dataclasses
import functools
import json

#: the version of dycl that writes manifests of this module's schema
DYCL_VERSION = "0.1.0"
#: the version of the manifest's layout; a manifest of another version is refused
SCHEMA_VERSION = 2
# the files of an artifact (sub-DNN files are named by their variant)
MANIFEST_FILE = "manifest.json"
HOST_FILE = "host.py"
CONSTANTS_FILE = "constants.bin"
CONSTANTS_MAGIC = b"DYCL-CONSTANTS\n"
#: dtype -> item size in bytes; anything else in a manifest is refused
DTYPE_SIZES = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
               "float16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


class ArtifactError(ValueError):
    """An artifact that fails a check; the message names the file or the manifest field."""


class ShapeGuardError(ValueError):
    """Inputs whose sizes a compiled sub-DNN's graph is not valid for (``ShapeGuard``)."""


class PortStructureError(ValueError):
    """A value handed to a compiled sub-DNN (an input, or one the host built) whose structure is not the
    compiled one: other dict keys or sequence length, another type, another compiled-in value."""


class InputShapeError(ValueError):
    """An input of a rank or size the model was not compiled for (a static dim, a symbolic dim that
    must equal another input's, an empty default batch): the host refuses it before running anything."""


class InputTypeError(ValueError):
    """An input that is not an array: ``name`` is the input, ``got`` the name of the type given
    (``dycl.CompiledModel`` says it again in torch's terms)."""

    def __init__(self, name, got):
        super().__init__(f"input {name!r}: expected a numpy array, got {got}")
        self.name = name
        self.got = got


# -- checks of parsed JSON: each returns the value or raises naming ``where`` --------------------

def _json_fail(where, expected, value):
    got = type(value).__name__ if not isinstance(value, (str, int, float)) else repr(value)[:60]
    raise ArtifactError(f"manifest.json: {where}: expected {expected}, got {got}")


def _json_object(value, where, required, optional=None):
    """``value`` as an object with every ``required`` field; with ``optional`` given,
    a field in neither is refused (a field this dycl does not know, it cannot honour)."""
    if not isinstance(value, dict):
        _json_fail(where, "an object", value)
    for key in required:
        if key not in value:
            raise ArtifactError(f"manifest.json: {where}: missing field {key!r}")
    if optional is not None:
        for key in value:
            if key not in required and key not in optional:
                raise ArtifactError(f"manifest.json: {where}: unexpected field {key!r} (schema {SCHEMA_VERSION} "
                                    f"has {', '.join(sorted((*required, *optional)))})")
    return value


def _json_expect(value, where, fits, expected):
    """``value`` when it ``fits``; else the ``ArtifactError`` saying what was ``expected``."""
    if not fits:
        _json_fail(where, expected, value)
    return value


def _json_string(value, where):
    return _json_expect(value, where, isinstance(value, str), "a string")


def _json_flag(value, where):
    return _json_expect(value, where, isinstance(value, bool), "true or false")


def _json_count(value, where):
    fits = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return _json_expect(value, where, fits, "a non-negative integer")


def _json_list(value, where):
    return _json_expect(value, where, isinstance(value, list), "a list")


def _json_dtype(value, where):
    return _json_expect(value, where, isinstance(value, str) and value in DTYPE_SIZES, f"one of {sorted(DTYPE_SIZES)}")


def _json_shape(value, where, symbolic=True):
    dims = []
    for axis, dim in enumerate(_json_list(value, where)):
        dims.append(dim if symbolic and isinstance(dim, str) else _json_count(dim, f"{where}[{axis}]"))
    return tuple(dims)


def _json_sha256(value, where):
    digest = _json_string(value, where)
    fits = len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
    return _json_expect(digest, where, fits, "64 lowercase hex digits")


def _json_table(value, where, read):
    """An object of named entries, each read by ``read(entry, where_of_entry)``."""
    return {name: read(entry, f"{where}.{name}") for name, entry in _json_object(value, where, ()).items()}


# -- the manifest ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Port:
    """One flat input or output of the model or of a sub-DNN: ``kind`` is "tensor"
    or the Python scalar type it carries ("int", "float", "bool"); a symbolic dim
    is its name."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int | str, ...]

    @classmethod
    def from_json(cls, value, where):
        _json_object(value, where, ("name", "kind", "dtype", "shape"), ())
        return cls(_json_string(value["name"], f"{where}.name"), _json_string(value["kind"], f"{where}.kind"),
                   _json_dtype(value["dtype"], f"{where}.dtype"), _json_shape(value["shape"], f"{where}.shape"))

    def to_json(self):
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype, "shape": list(self.shape)}


def _json_ports(value, where):
    return tuple(Port.from_json(port, f"{where}[{position}]") for position, port in enumerate(_json_list(value, where)))


@dataclasses.dataclass(frozen=True)
class FileEntry:
    """A file of the artifact and its sha256."""

    file: str
    sha256: str

    @classmethod
    def from_json(cls, value, where):
        _json_object(value, where, ("file", "sha256"), ())
        return cls(_json_string(value["file"], f"{where}.file"), _json_sha256(value["sha256"], f"{where}.sha256"))

    def to_json(self):
        return {"file": self.file, "sha256": self.sha256}


@dataclasses.dataclass(frozen=True)
class ShapeGuard:
    """A condition on a sub-DNN's input sizes under which its graph is valid: library
    code decided on a symbolic dim in Python while it was traced (``dycl.export.shape_guards``).

    ``holds``: a Python expression over dim names (``(d0 > (1))``) using only
    integers, ``+ - * // % **``, comparisons, ``and or not`` and ``min``/``max``;
    ``dims``: dim name -> ``(input position, axis)`` of the sub-DNN's input it is
    read from; ``where``: the file:line that decided. The expression is parsed and
    checked against that grammar when the manifest is read, and evaluated by
    walking its syntax tree (never ``eval``)."""

    holds: str
    dims: dict
    where: str

    @classmethod
    def from_json(cls, value, where):
        _json_object(value, where, ("holds", "dims", "where"), ())
        dims = {}
        for name, use in _json_object(value["dims"], f"{where}.dims", ()).items():
            if not name.isidentifier() or not isinstance(use, list) or len(use) != 2:
                _json_fail(f"{where}.dims.{name}", "an identifier mapped to [input position, axis]", use)
            here = f"{where}.dims.{name}"
            dims[name] = (_json_count(use[0], f"{here}[0]"), _json_count(use[1], f"{here}[1]"))
        holds = _json_string(value["holds"], f"{where}.holds")
        try:
            _guard_tree(holds, tuple(sorted(dims)))
        except (SyntaxError, ValueError, RecursionError) as error:
            _json_fail(f"{where}.holds", f"a size condition over {sorted(dims)} ({error})", holds)
        return cls(holds, dims, _json_string(value["where"], f"{where}.where"))

    def to_json(self):
        return {"holds": self.holds, "dims": {name: list(use) for name, use in self.dims.items()},
                "where": self.where}


_GUARD_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a ** b,
                    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
                    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


@functools.lru_cache(maxsize=256)
def _guard_tree(text, names):
    """The syntax tree of a ``ShapeGuard`` condition; ValueError for anything outside its grammar."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in names and node.id not in ("min", "max"):
                raise ValueError(f"unknown name {node.id!r}")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in ("min", "max") or node.keywords \
                    or len(node.args) < 2:
                raise ValueError("a call other than min(...) or max(...)")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int):
                raise ValueError(f"a constant {node.value!r}")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _GUARD_OPERATORS:
                raise ValueError(f"the operator {type(node.op).__name__}")
            small = isinstance(node.right, ast.Constant) and 0 <= node.right.value <= 8
            if isinstance(node.op, ast.Pow) and not small:
                raise ValueError("a power other than 0 to 8")
        elif isinstance(node, ast.Compare):
            if len(node.ops) != 1 or type(node.ops[0]) not in _GUARD_OPERATORS:
                raise ValueError("a comparison other than one of == != < <= > >=")
        elif not isinstance(node, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
                                   ast.Load, *_GUARD_OPERATORS)):
            raise ValueError(f"a {type(node).__name__}")
    return tree


def _guard_value(node, sizes):
    """The value of a checked condition tree at ``sizes``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return sizes[node.id]
    if isinstance(node, ast.BoolOp):
        values = (_guard_value(value, sizes) for value in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        operand = _guard_value(node.operand, sizes)
        return (not operand) if isinstance(node.op, ast.Not) else -operand
    if isinstance(node, ast.BinOp):
        return _GUARD_OPERATORS[type(node.op)](_guard_value(node.left, sizes), _guard_value(node.right, sizes))
    if isinstance(node, ast.Compare):
        return _GUARD_OPERATORS[type(node.ops[0])](_guard_value(node.left, sizes),
                                                   _guard_value(node.comparators[0], sizes))
    values = [_guard_value(arg, sizes) for arg in node.args]  # min/max, checked by _guard_tree
    return min(values) if node.func.id == "min" else max(values)


def check_shape_guard(guard, args, sub_dnn):
    """Raise ``ShapeGuardError`` unless ``guard`` (a ``ShapeGuard``, read by attribute)
    holds for the arrays ``args`` passed to ``sub_dnn``."""
    sizes = {}
    for name, (position, axis) in guard.dims.items():
        size = int(args[position].shape[axis])
        if size < 1:
            raise ShapeGuardError(f"a size of 0 where {sub_dnn} was compiled for sizes of at least 1 "
                                  f"(input {position}, dimension {axis})")
        sizes[name] = size
    if not _guard_value(_guard_tree(guard.holds, tuple(sorted(guard.dims))).body, sizes):
        shown = ", ".join(f"{name} = {size}" for name, size in sizes.items())
        raise ShapeGuardError(f"the compiled model is valid for sizes where {guard.holds} (decided by the code at "
                              f"{guard.where} when it was traced); got {shown}. Compile with an example whose "
                              "sizes take the same path, or mark the dim static (dynamic=False)")


@dataclasses.dataclass(frozen=True)
class SubDNNEntry:
    """One compiled sub-DNN variant: its file (variants that are identical share
    one), its input and output ports, in the order the host passes them, the
    shape conditions its graph needs (``ShapeGuard``; none for most) and
    ``otherwise``: the entry (same ports, another graph) the host runs where those
    conditions fail and its own hold, e.g. the graph traced at a size of 1.
    ``threads``: at most this many intra-op threads run it (1: on the calling thread, for
    a graph too small to pay for a thread pool's hand-off; None: the load's setting).
    ``sizes``: each named symbolic dim of the graph's inputs at the example (``{"batch": 1}``),
    where the host may make a session fixed to them at load (None: it specializes only to what
    it sees). ``spin``: True where the session's pool spins while a run lasts (and stops when it
    returns), which the compile timed as faster (``dycl.backends.spin_choice``; None: it sleeps)."""

    file: str
    sha256: str
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    guards: tuple[ShapeGuard, ...] = ()
    otherwise: str | None = None
    threads: int | None = None
    sizes: dict | None = None
    spin: bool | None = None

    @classmethod
    def from_json(cls, value, where):
        _json_object(value, where, ("file", "sha256", "inputs", "outputs"),
                     ("guards", "otherwise", "threads", "sizes", "spin"))
        entry = FileEntry.from_json({"file": value["file"], "sha256": value["sha256"]}, where)
        guards = tuple(ShapeGuard.from_json(guard, f"{where}.guards[{position}]")
                       for position, guard in enumerate(_json_list(value.get("guards", []), f"{where}.guards")))
        otherwise = value.get("otherwise")
        if otherwise is not None:
            _json_string(otherwise, f"{where}.otherwise")
        threads = value.get("threads")
        if threads is not None and (type(threads) is not int or threads < 1):
            _json_fail(f"{where}.threads", "a positive integer", threads)
        spin = value.get("spin")
        if spin is not None and spin is not True:
            _json_fail(f"{where}.spin", "true", spin)
        return cls(entry.file, entry.sha256, _json_ports(value["inputs"], f"{where}.inputs"),
                   _json_ports(value["outputs"], f"{where}.outputs"), guards, otherwise, threads,
                   _json_sizes(value.get("sizes"), f"{where}.sizes"), spin)

    def to_json(self):
        value = {"file": self.file, "sha256": self.sha256, "inputs": [p.to_json() for p in self.inputs],
                 "outputs": [p.to_json() for p in self.outputs]}
        if self.guards:
            value["guards"] = [guard.to_json() for guard in self.guards]
        if self.otherwise is not None:
            value["otherwise"] = self.otherwise
        if self.threads is not None:
            value["threads"] = self.threads
        if self.sizes is not None:
            value["sizes"] = dict(self.sizes)
        if self.spin is not None:
            value["spin"] = self.spin
        return value


def _json_sizes(value, where):
    """``SubDNNEntry.sizes``: None, or names to sizes (non-negative integers)."""
    if value is None:
        return None
    for name, size in _json_object(value, where, ()).items():
        if type(size) is not int or size < 0:
            _json_fail(f"{where}.{name}", "a non-negative integer", size)
    return dict(value)


def _json_alternatives(sub_dnns):
    """Each ``otherwise`` names another entry, and following them never comes back."""
    for name, entry in sub_dnns.items():
        seen = {name}
        while entry.otherwise is not None:
            if entry.otherwise not in sub_dnns:
                _json_fail(f"sub_dnns.{name}.otherwise", "the name of another sub_dnns entry", entry.otherwise)
            if entry.otherwise in seen:
                _json_fail(f"sub_dnns.{name}.otherwise", "a chain of alternatives without a cycle", entry.otherwise)
            seen.add(entry.otherwise)
            entry = sub_dnns[entry.otherwise]
    return sub_dnns


@dataclasses.dataclass(frozen=True)
class ConstantArray:
    """Where one stored constant lies in the constants file (``offset`` from its data section)."""

    offset: int
    dtype: str
    shape: tuple[int, ...]

    @classmethod
    def from_json(cls, value, where):
        _json_object(value, where, ("offset", "dtype", "shape"), ())
        return cls(_json_count(value["offset"], f"{where}.offset"), _json_dtype(value["dtype"], f"{where}.dtype"),
                   _json_shape(value["shape"], f"{where}.shape", symbolic=False))

    def to_json(self):
        return {"offset": self.offset, "dtype": self.dtype, "shape": list(self.shape)}


@dataclasses.dataclass(frozen=True)
class Constants:
    """The constants file (``hcfg.optimize.hoist_constants``' values) and its table."""

    file: str
    sha256: str
    arrays: dict[str, ConstantArray]

    @classmethod
    def from_json(cls, value, where):
        _json_object(value, where, ("file", "sha256", "arrays"), ())
        entry = FileEntry.from_json({"file": value["file"], "sha256": value["sha256"]}, where)
        return cls(entry.file, entry.sha256, _json_table(value["arrays"], f"{where}.arrays", ConstantArray.from_json))

    def to_json(self):
        return {"file": self.file, "sha256": self.sha256,
                "arrays": {key: array.to_json() for key, array in self.arrays.items()}}


@dataclasses.dataclass(frozen=True)
class Output:
    """One array or Python value the model returns, named as ``host.py`` names it
    in its ``.npz`` (``output_0``, ...); ``dtype`` and ``example_shape`` (the
    shape at the example) for arrays only; ``shape`` with the input's symbolic dims
    by name (``["batch", 10]``) where dycl found it (``dycl.artifact.outputs``)."""

    name: str
    kind: str
    dtype: str | None = None
    example_shape: tuple[int, ...] | None = None
    shape: tuple[int | str, ...] | None = None

    @classmethod
    def from_json(cls, value, where):
        _json_object(value, where, ("name", "kind"), ("dtype", "example_shape", "shape"))
        dtype = _json_dtype(value["dtype"], f"{where}.dtype") if "dtype" in value else None
        example = _json_shape(value["example_shape"], f"{where}.example_shape", symbolic=False) \
            if "example_shape" in value else None
        shape = _json_shape(value["shape"], f"{where}.shape") if "shape" in value else None
        return cls(_json_string(value["name"], f"{where}.name"), _json_string(value["kind"], f"{where}.kind"),
                   dtype, example, shape)

    def to_json(self):
        value = {"name": self.name, "kind": self.kind}
        if self.dtype is not None:
            value["dtype"] = self.dtype
        if self.example_shape is not None:
            value["example_shape"] = list(self.example_shape)
        if self.shape is not None:
            value["shape"] = list(self.shape)
        return value


# the kinds of ``inspect.Parameter`` by name, as a call form writes them
PARAMETER_KINDS = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD")


@dataclasses.dataclass(frozen=True)
class CallForm:
    """forward()'s parameters and the form of the call compiled for: what the host's
    ``_bind`` needs to bind a later call the same way and to refuse a call of another
    form (the host's ``CALL`` is ``to_host()``; the manifest's ``call`` is ``to_json()``).

    ``parameters``: ``(name, kind, has_default)`` for each parameter after ``self``
    (``kind``: one of ``PARAMETER_KINDS``); ``inputs``: ``(flat input, parameter, key)``
    for each input of the compiled function (``key``: None, a position or a dict key
    inside the parameter's value); ``fixed``: ``(parameter, key, value)`` the example
    fixed, which a call must pass equal or leave out; ``absent``: the parameters the
    example left out; ``variadic``: ``(parameter, count or keys)``: the length of
    ``*args`` or the keys of ``**kwargs`` the example passed; ``structures``: ``(parameter,
    key, skeleton)`` for each argument (``key``: None, or its key in ``*args``/``**kwargs``) whose
    value holds records (a KV cache: ``dycl.model.records``); each of its arrays is an input
    whose key is ``[key, position among its arrays]``; ``returned``: ``(parameter, key, path)`` for
    each such argument (a record) that forward returns itself, updated in place, at ``path`` of
    the output's plain form: the host updates the caller's plain form and returns it there.

    ``from_json(c.to_json()) == c`` whenever the fixed values are JSON values
    (a value JSON cannot write is written as its ``repr``)."""

    parameters: tuple = ()
    inputs: tuple = ()
    fixed: tuple = ()
    absent: tuple = ()
    variadic: tuple = ()
    structures: tuple = ()
    returned: tuple = ()

    @classmethod
    def of(cls, parameters, inputs, fixed, absent, variadic, structures=None, returned=()):
        """The call form of sequences and a ``variadic`` dict as the rewriter and the library wrapper collect them."""
        return cls(tuple((str(name), str(kind), bool(default)) for name, kind, default in parameters),
                   tuple((name, parameter, key) for name, parameter, key in inputs),
                   tuple((parameter, key, value) for parameter, key, value in fixed),
                   tuple(absent),
                   tuple((name, tuple(value) if isinstance(value, (list, tuple)) else value)
                         for name, value in dict(variadic).items()),
                   tuple((name, key, skeleton) for name, key, skeleton in structures or ()),
                   tuple((name, key, tuple(path)) for name, key, path in returned))

    @classmethod
    def plain(cls, parameters, specialized):
        """The call form of a function whose parameters are all plain, the ``specialized``
        ones (name -> value) with their compiled-in values."""
        return cls(tuple((name, "POSITIONAL_OR_KEYWORD", name in specialized) for name in parameters),
                   tuple((name, name, None) for name in parameters if name not in specialized),
                   tuple((name, None, value) for name, value in specialized.items()))

    def to_host(self):
        """The host's ``CALL``: the call form as a dict of lists, with the fixed values as they are."""
        structures = {"structures": [list(row) for row in self.structures]} if self.structures else {}
        if self.returned:
            structures["returned"] = [[name, key, list(path)] for name, key, path in self.returned]
        return structures | {"parameters": [list(p) for p in self.parameters], "inputs": [list(i) for i in self.inputs],
                "fixed": [list(f) for f in self.fixed], "absent": list(self.absent),
                "variadic": {name: list(value) if isinstance(value, tuple) else value
                             for name, value in self.variadic}}

    def to_json(self):
        """The manifest's ``call`` (a fixed value JSON cannot write is written as its ``repr``)."""
        return json.loads(json.dumps(self.to_host(), default=repr))

    @classmethod
    def from_json(cls, value, where="call"):
        """The call form of parsed JSON ``value``; ``ArtifactError`` naming the first field that does not fit."""
        _json_object(value, where, ("parameters", "inputs", "fixed", "absent", "variadic"), ("structures", "returned"))
        parameters = tuple(_call_row(row, f"{where}.parameters[{n}]", _call_parameter)
                           for n, row in enumerate(_json_list(value["parameters"], f"{where}.parameters")))
        inputs = tuple(_call_row(row, f"{where}.inputs[{n}]", _call_input)
                       for n, row in enumerate(_json_list(value["inputs"], f"{where}.inputs")))
        fixed = tuple(_call_row(row, f"{where}.fixed[{n}]", _call_fixed)
                      for n, row in enumerate(_json_list(value["fixed"], f"{where}.fixed")))
        absent = tuple(_json_string(name, f"{where}.absent[{n}]")
                       for n, name in enumerate(_json_list(value["absent"], f"{where}.absent")))
        variadic = tuple((name, _call_variadic(passed, f"{where}.variadic.{name}"))
                         for name, passed in _json_object(value["variadic"], f"{where}.variadic", ()).items())
        structures = tuple(_call_row(row, f"{where}.structures[{n}]", _call_structure)
                           for n, row in enumerate(_json_list(value.get("structures", []), f"{where}.structures")))
        returned = tuple(_call_row(row, f"{where}.returned[{n}]", _call_returned)
                         for n, row in enumerate(_json_list(value.get("returned", []), f"{where}.returned")))
        return cls(parameters, inputs, fixed, absent, variadic, structures, returned)


def _call_row(row, where, read):
    if not isinstance(row, list) or len(row) != 3:
        _json_fail(where, "a list of 3 items", row)
    return read(row, where)


def _call_key(key, where):
    fits = key is None or isinstance(key, str) or isinstance(key, int) and not isinstance(key, bool)
    return _json_expect(key, where, fits, "null, an integer or a string")


def _call_input_key(key, where):
    """An input's key: a ``_call_key``, or ``[key, position]`` for an array of a structure."""
    if not isinstance(key, list):
        return _call_key(key, where)
    if len(key) != 2:
        _json_fail(where, "[key, position]", key)
    return _call_key(key[0], f"{where}[0]"), _json_count(key[1], f"{where}[1]")


def _call_returned(row, where):
    path = tuple(_call_key(step, f"{where}[2][{n}]") for n, step in enumerate(_json_list(row[2], f"{where}[2]")))
    return _json_string(row[0], f"{where}[0]"), _call_key(row[1], f"{where}[1]"), path


def _call_structure(row, where):
    return _json_string(row[0], f"{where}[0]"), _call_key(row[1], f"{where}[1]"), row[2]


def _call_parameter(row, where):
    kind = _json_expect(row[1], f"{where}[1]", row[1] in PARAMETER_KINDS, f"one of {list(PARAMETER_KINDS)}")
    return _json_string(row[0], f"{where}[0]"), kind, _json_flag(row[2], f"{where}[2]")


def _call_input(row, where):
    return (_json_string(row[0], f"{where}[0]"), _json_string(row[1], f"{where}[1]"),
            _call_input_key(row[2], f"{where}[2]"))


def _call_fixed(row, where):
    return _json_string(row[0], f"{where}[0]"), _call_key(row[1], f"{where}[1]"), row[2]


def _call_variadic(passed, where):
    if isinstance(passed, list):
        return tuple(_json_string(key, f"{where}[{n}]") for n, key in enumerate(passed))
    return _json_count(passed, where)


def _json_dim_uses(value, where):
    uses = []
    for position, use in enumerate(_json_list(value, where)):
        here = f"{where}[{position}]"
        if not isinstance(use, list) or len(use) != 2:
            _json_fail(here, "[input name, axis]", use)
        uses.append((_json_string(use[0], f"{here}[0]"), _json_count(use[1], f"{here}[1]")))
    return tuple(uses)


_MANIFEST_REQUIRED = ("schema", "dycl_version", "backend", "model", "inputs", "host", "sub_dnns")
_MANIFEST_OPTIONAL = ("outputs", "call", "dynamic_dims", "constants", "output", "per_sample", "written_inputs")


@dataclasses.dataclass(frozen=True)
class Manifest:
    """What an artifact holds and how to call it.

    ``inputs``: the model's flat inputs; ``outputs``: what it returns for the
    example; ``call``: forward()'s parameters and the form of the call compiled
    for (``CallForm``); ``dynamic_dims``: symbol -> the
    ``(input, axis)`` pairs that carry it; ``host``, ``sub_dnns``, ``constants``:
    the files; ``output``: how ``dycl`` rebuilds a framework's output object
    (``dycl.model.outputs.describe``), None for plain returns.

    ``manifest["field"]`` reads a field as it is written in ``manifest.json``
    (a fresh copy), for code written against the JSON document."""

    dycl_version: str
    backend: str
    model: str
    inputs: tuple[Port, ...]
    host: FileEntry
    sub_dnns: dict[str, SubDNNEntry]
    outputs: tuple[Output, ...] = ()
    call: CallForm | None = None
    dynamic_dims: dict[str, tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=dict)
    constants: Constants | None = None
    output: object = None
    per_sample: bool = False
    #: inputs forward() updates in place, by flat input name: the host writes their final values back into
    #: the caller's arrays (``dycl.in_process.written_inputs``)
    written_inputs: tuple[str, ...] = ()
    schema: int = SCHEMA_VERSION

    @classmethod
    def from_json(cls, value):
        """The manifest of parsed JSON ``value``; ``ArtifactError`` naming the first field that does not fit."""
        _json_object(value, "(top level)", ())
        if "schema" not in value:
            version = value.get("dycl_version")
            raise ArtifactError(f"manifest.json: schema: missing: the artifact was written by an older dycl "
                                f"({version if isinstance(version, str) else 'unknown version'}) whose manifest "
                                f"this dycl (schema {SCHEMA_VERSION}) does not read: recompile the model")
        if value["schema"] != SCHEMA_VERSION:
            _json_fail("schema", f"manifest schema {SCHEMA_VERSION} (recompile the model with this dycl)",
                       value["schema"])
        _json_object(value, "(top level)", _MANIFEST_REQUIRED, _MANIFEST_OPTIONAL)
        host = FileEntry.from_json(value["host"], "host")
        if host.file != HOST_FILE:
            _json_fail("host.file", repr(HOST_FILE), host.file)
        return cls(
            dycl_version=_json_string(value["dycl_version"], "dycl_version"),
            backend=_json_string(value["backend"], "backend"),
            model=_json_string(value["model"], "model"),
            inputs=_json_ports(value["inputs"], "inputs"),
            host=host,
            sub_dnns=_json_alternatives(_json_table(value["sub_dnns"], "sub_dnns", SubDNNEntry.from_json)),
            outputs=tuple(Output.from_json(output, f"outputs[{position}]")
                          for position, output in enumerate(_json_list(value.get("outputs", []), "outputs"))),
            call=CallForm.from_json(value["call"]) if "call" in value else None,
            dynamic_dims=_json_table(value.get("dynamic_dims", {}), "dynamic_dims", _json_dim_uses),
            constants=Constants.from_json(value["constants"], "constants") if "constants" in value else None,
            output=value.get("output"),
            per_sample=_json_flag(value.get("per_sample", False), "per_sample"),
            written_inputs=tuple(_json_string(name, f"written_inputs[{position}]") for position, name
                                 in enumerate(_json_list(value.get("written_inputs", []), "written_inputs"))),
        )

    def to_json(self):
        """The JSON document (``manifest.json``) of this manifest."""
        value = {
            "schema": self.schema,
            "dycl_version": self.dycl_version,
            "backend": self.backend,
            "model": self.model,
            "inputs": [port.to_json() for port in self.inputs],
            "outputs": [output.to_json() for output in self.outputs],
            "dynamic_dims": {name: [list(use) for use in uses] for name, uses in self.dynamic_dims.items()},
            "host": self.host.to_json(),
            "sub_dnns": {name: entry.to_json() for name, entry in self.sub_dnns.items()},
        }
        if self.call is not None:
            value["call"] = self.call.to_json()
        if self.constants is not None:
            value["constants"] = self.constants.to_json()
        if self.output is not None:
            value["output"] = json.loads(json.dumps(self.output))
        if self.per_sample:
            value["per_sample"] = True
        if self.written_inputs:
            value["written_inputs"] = list(self.written_inputs)
        return value

    def to_bytes(self):
        """The bytes of ``manifest.json``: sorted keys, so that equal manifests are equal files."""
        return (json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n").encode()

    def file_entries(self):
        """``[(where, FileEntry-like)]``: every file the manifest lists, host first,
        each with the manifest field that names it."""
        entries = [("host", self.host)] + [(f"sub_dnns.{name}", entry) for name, entry in self.sub_dnns.items()]
        if self.constants is not None:
            entries.append(("constants", self.constants))
        return entries

    def __getitem__(self, key):
        value = self.to_json()
        if key not in value:
            raise KeyError(key)
        return value[key]

    def __contains__(self, key):
        return key in self.to_json()
