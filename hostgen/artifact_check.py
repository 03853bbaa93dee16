"""Checks on a dycl artifact directory, done before anything in it runs.

Assumes nothing about the directory. Guarantees, when ``verified_artifact``
returns: ``manifest.json`` is valid JSON of the manifest schema (an error names
the field); every file it lists is a plain name (no separators, no ``..``, not
absolute) of a regular file inside the directory, not a symbolic link, read once
and equal to its recorded sha256; no ONNX model refers to external data; the
constants table agrees with the table stored inside the (checksummed) constants
file, and every array lies inside it with a whitelisted dtype. No file outside
the directory is opened, so no error can describe one.

The source of this module is copied verbatim into every generated ``host.py``
(which must not import dycl), and ``dycl.artifact`` imports it: one
implementation for both. Hence: standard library only, no ``__future__`` import.
"""

import hashlib
import json
import os
import stat

#: dtype -> item size in bytes; anything else in a manifest is refused
DTYPE_SIZES = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
               "float16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}
CONSTANTS_MAGIC = b"DYCL-CONSTANTS\n"


class ArtifactError(ValueError):
    """An artifact that fails a check; the message names the file or the manifest field."""


def read_plain_file(directory, name, where):
    """The bytes of ``directory/name`` where ``name`` (found at manifest field
    ``where``) is a plain file name of a regular file that is not a symbolic link."""
    if not isinstance(name, str) or not name or name in (".", "..") or any(c in name for c in "/\\\0") \
            or os.path.isabs(name):
        raise ArtifactError(f"manifest.json: {where}: {name!r} is not a plain file name inside the artifact "
                            f"directory (no path separators, no '..', not absolute)")
    path = os.path.join(os.fspath(directory), name)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is listed in the manifest ({where}) but missing") from None
    if stat.S_ISLNK(info.st_mode):
        raise ArtifactError(f"{path} ({where}) is a symbolic link; an artifact holds only regular files")
    if not stat.S_ISREG(info.st_mode):
        raise ArtifactError(f"{path} ({where}) is not a regular file")
    handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(handle, "rb") as file:
        return file.read()


def read_manifest(directory, expected_version=None):
    """The manifest of ``directory``, checked against the schema (and the dycl
    version that wrote it, when ``expected_version`` is given)."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{directory} is not a directory")
    if not os.path.lexists(os.path.join(os.fspath(directory), "manifest.json")):
        raise FileNotFoundError(f"{directory} has no manifest.json: not a dycl artifact directory")
    text = read_plain_file(directory, "manifest.json", "manifest.json")
    try:
        manifest = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ArtifactError(f"manifest.json is not valid JSON ({type(error).__name__}: {error})"[:300]) from None
    check_manifest(manifest)
    if expected_version is not None and manifest["dycl_version"] != expected_version:
        raise ArtifactError(f"artifact was written by dycl {manifest['dycl_version']}, this host is "
                            f"{expected_version}: recompile the model")
    return manifest


def verified_artifact(directory, expected_version=None):
    """``(manifest, files)``: the checked manifest and the verified bytes of every
    file it lists (host.py included), by file name."""
    manifest = read_manifest(directory, expected_version)
    files = {}
    entries = [("host", manifest["host"])] + [(f"sub_dnns.{name}", entry)
                                               for name, entry in manifest["sub_dnns"].items()]
    if "constants" in manifest:
        entries.append(("constants", manifest["constants"]))
    for where, entry in entries:
        name = entry["file"]
        if name in files:
            data = files[name]
        else:
            data = files[name] = read_plain_file(directory, name, f"{where}.file")
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"]:
            raise ArtifactError(f"checksum mismatch for {name}: manifest says {entry['sha256']}, file has "
                                f"{digest} (the artifact is corrupted or was modified)")
    if manifest["backend"] == "onnxruntime":
        for name, entry in manifest["sub_dnns"].items():
            if onnx_uses_external_data(files[entry["file"]]):
                raise ArtifactError(f"{entry['file']} (sub_dnns.{name}) refers to external data files; dycl "
                                    f"artifacts keep every weight inside the model file")
    if "constants" in manifest:
        constant_layout(files[manifest["constants"]["file"]], manifest["constants"]["arrays"])
    return manifest, files


def constant_layout(blob, table):
    """``{key: (dtype, byte offset, shape)}`` of the arrays in a constants file,
    after checking ``table`` (the manifest's) against the file's own table."""
    if not blob.startswith(CONSTANTS_MAGIC) or b"\n" not in blob[len(CONSTANTS_MAGIC):]:
        raise ArtifactError("constants file: no dycl constants header")
    end = blob.index(b"\n", len(CONSTANTS_MAGIC))
    try:
        stored = json.loads(blob[len(CONSTANTS_MAGIC):end])
    except (ValueError, RecursionError):
        raise ArtifactError("constants file: its header is not valid JSON") from None
    if stored != table:
        raise ArtifactError("manifest.json: constants.arrays differs from the table inside the constants file "
                            "(dtype, offset or shape changed)")
    start = (end + 1 + 63) // 64 * 64
    layout = {}
    for key, array in table.items():
        count = 1
        for dim in array["shape"]:
            count *= dim
        offset = start + array["offset"]
        if offset + count * DTYPE_SIZES[array["dtype"]] > len(blob):
            raise ArtifactError(f"manifest.json: constants.arrays.{key}: extends past the end of the constants file")
        layout[key] = (array["dtype"], offset, tuple(array["shape"]))
    return layout


# -- the manifest schema ------------------------------------------------------------------------

def _schema_fail(where, expected, value):
    got = type(value).__name__ if not isinstance(value, (str, int, float)) else repr(value)[:60]
    raise ArtifactError(f"manifest.json: {where}: expected {expected}, got {got}")


def _schema_object(value, where, required):
    if not isinstance(value, dict):
        _schema_fail(where, "an object", value)
    for key in required:
        if key not in value:
            raise ArtifactError(f"manifest.json: {where}: missing field {key!r}")
    return value


def _schema_string(value, where):
    if not isinstance(value, str):
        _schema_fail(where, "a string", value)
    return value


def _schema_count(value, where):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        _schema_fail(where, "a non-negative integer", value)
    return value


def _schema_list(value, where):
    if not isinstance(value, list):
        _schema_fail(where, "a list", value)
    return value


def _schema_dtype(value, where):
    if value not in DTYPE_SIZES:
        _schema_fail(where, f"one of {sorted(DTYPE_SIZES)}", value)


def _schema_shape(value, where, symbolic=True):
    for axis, dim in enumerate(_schema_list(value, where)):
        if symbolic and isinstance(dim, str):
            continue
        _schema_count(dim, f"{where}[{axis}]")


def _schema_file_entry(value, where):
    _schema_object(value, where, ("file", "sha256"))
    _schema_string(value["file"], f"{where}.file")
    digest = _schema_string(value["sha256"], f"{where}.sha256")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        _schema_fail(f"{where}.sha256", "64 lowercase hex digits", digest)


def _schema_ports(value, where):
    for position, port in enumerate(_schema_list(value, where)):
        here = f"{where}[{position}]"
        _schema_object(port, here, ("name", "kind", "dtype", "shape"))
        _schema_string(port["name"], f"{here}.name")
        _schema_string(port["kind"], f"{here}.kind")
        _schema_dtype(port["dtype"], f"{here}.dtype")
        _schema_shape(port["shape"], f"{here}.shape")


def check_manifest(manifest):
    """Raise ``ArtifactError`` naming the first field of ``manifest`` that does not fit the schema."""
    _schema_object(manifest, "(top level)", ("dycl_version", "backend", "model", "inputs", "host", "sub_dnns"))
    for key in ("dycl_version", "backend", "model"):
        _schema_string(manifest[key], key)
    _schema_ports(manifest["inputs"], "inputs")
    for position, output in enumerate(_schema_list(manifest.get("outputs", []), "outputs")):
        _schema_object(output, f"outputs[{position}]", ("name", "kind"))
    _schema_file_entry(manifest["host"], "host")
    if manifest["host"]["file"] != "host.py":
        _schema_fail("host.file", "'host.py'", manifest["host"]["file"])
    for name, entry in _schema_object(manifest["sub_dnns"], "sub_dnns", ()).items():
        _schema_file_entry(entry, f"sub_dnns.{name}")
        _schema_object(entry, f"sub_dnns.{name}", ("inputs", "outputs"))
        _schema_ports(entry["inputs"], f"sub_dnns.{name}.inputs")
        _schema_ports(entry["outputs"], f"sub_dnns.{name}.outputs")
    if "constants" in manifest:
        _schema_file_entry(manifest["constants"], "constants")
        _schema_object(manifest["constants"], "constants", ("arrays",))
        arrays = _schema_object(manifest["constants"]["arrays"], "constants.arrays", ())
        for key, array in arrays.items():
            here = f"constants.arrays.{key}"
            _schema_object(array, here, ("offset", "dtype", "shape"))
            _schema_count(array["offset"], f"{here}.offset")
            _schema_dtype(array["dtype"], f"{here}.dtype")
            _schema_shape(array["shape"], f"{here}.shape", symbolic=False)


# -- ONNX external data -------------------------------------------------------------------------
# Note: a minimal protobuf walk (the host cannot import onnx). It visits every
# TensorProto an ONNX model can hold (initializers, sparse initializers, Constant
# attributes, subgraphs, functions) and reports one that is stored outside the
# file (TensorProto.data_location == EXTERNAL or an external_data entry).

# message -> {field number: message type of that (length-delimited) field}
_ONNX_FIELDS = {
    "model": {7: "graph", 25: "function"},
    "graph": {1: "node", 5: "tensor", 15: "sparse"},
    "function": {7: "node"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "sparse": {1: "tensor", 2: "tensor"},
}


def _protobuf_varint(data, position):
    result = shift = 0
    while True:
        if position >= len(data):
            raise ArtifactError("an ONNX file is truncated (not a valid protobuf)")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def onnx_uses_external_data(data, kind="model", depth=0):
    """Whether the serialized ONNX ``kind`` message ``data`` refers to external data."""
    if depth > 64:
        raise ArtifactError("an ONNX file nests subgraphs too deeply")
    view = memoryview(data)
    position = 0
    while position < len(view):
        key, position = _protobuf_varint(view, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _protobuf_varint(view, position)
            if kind == "tensor" and number == 14 and value == 1:
                return True
        elif wire == 2:
            length, position = _protobuf_varint(view, position)
            body = view[position:position + length]
            position += length
            if kind == "tensor" and number == 13:
                return True
            child = _ONNX_FIELDS.get(kind, {}).get(number)
            if child is not None and onnx_uses_external_data(body, child, depth + 1):
                return True
        elif wire == 1:
            position += 8
        elif wire == 5:
            position += 4
        else:
            raise ArtifactError("an ONNX file is not a valid protobuf (unknown wire type)")
    return False
