"""Checks on a dycl artifact directory, done before anything in it runs.

Assumes nothing about the directory. Guarantees, when ``verified_artifact``
returns: ``manifest.json`` is valid JSON of the manifest schema
(``hostgen/manifest.py``; an error names the field); every file it lists is a
plain name (no separators, no ``..``, not absolute) of a regular file inside the
directory, not a symbolic link, read once and equal to its recorded sha256; no
ONNX model refers to external data; the constants table agrees with the table
stored inside the (checksummed) constants file, and every array lies inside it
with a whitelisted dtype. No file outside the directory is opened, so no error
can describe one.

The source of this module is copied verbatim into every generated ``host.py``
(which must not import dycl), after ``manifest.py``, and ``dycl.artifact``
imports it: one implementation for both. Hence: standard library only, no
``__future__`` import; the one import of dycl below is the line the host's
copy leaves out (``hostgen.template``), where ``manifest.py`` precedes it.
"""

import hashlib
import json
import os
import stat

from dycl.hostgen.manifest import CONSTANTS_MAGIC, DTYPE_SIZES, MANIFEST_FILE, ArtifactError, Manifest  # dycl only


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
    """The ``Manifest`` of ``directory``, checked against the schema (and the dycl
    version that wrote it, when ``expected_version`` is given)."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{directory} is not a directory")
    if not os.path.lexists(os.path.join(os.fspath(directory), MANIFEST_FILE)):
        raise FileNotFoundError(f"{directory} has no {MANIFEST_FILE}: not a dycl artifact directory")
    text = read_plain_file(directory, MANIFEST_FILE, MANIFEST_FILE)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ArtifactError(f"{MANIFEST_FILE} is not valid JSON ({type(error).__name__}: {error})"[:300]) from None
    manifest = Manifest.from_json(document)
    if expected_version is not None and manifest.dycl_version != expected_version:
        raise ArtifactError(f"artifact was written by dycl {manifest.dycl_version}, this host is "
                            f"{expected_version}: recompile the model")
    return manifest


def verified_artifact(directory, expected_version=None):
    """``(manifest, files)``: the checked ``Manifest`` and the verified bytes of
    every file it lists (host.py included), by file name."""
    manifest = read_manifest(directory, expected_version)
    files = {}
    for where, entry in manifest.file_entries():
        name = entry.file
        if name in files:
            data = files[name]
        else:
            data = files[name] = read_plain_file(directory, name, f"{where}.file")
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry.sha256:
            raise ArtifactError(f"checksum mismatch for {name}: manifest says {entry.sha256}, file has "
                                f"{digest} (the artifact is corrupted or was modified)")
    if manifest.backend == "onnxruntime":
        for name, entry in manifest.sub_dnns.items():
            if onnx_uses_external_data(files[entry.file]):
                raise ArtifactError(f"{entry.file} (sub_dnns.{name}) refers to external data files; dycl "
                                    f"artifacts keep every weight inside the model file")
    if manifest.constants is not None:
        constant_layout(files[manifest.constants.file], manifest.constants.arrays)
    return manifest, files


def constant_layout(blob, arrays):
    """``{key: (dtype, byte offset, shape)}`` of the arrays in a constants file,
    after checking ``arrays`` (the manifest's ``ConstantArray`` table) against the
    file's own table."""
    if not blob.startswith(CONSTANTS_MAGIC) or b"\n" not in blob[len(CONSTANTS_MAGIC):]:
        raise ArtifactError("constants file: no dycl constants header")
    end = blob.index(b"\n", len(CONSTANTS_MAGIC))
    try:
        stored = json.loads(blob[len(CONSTANTS_MAGIC):end])
    except (ValueError, RecursionError):
        raise ArtifactError("constants file: its header is not valid JSON") from None
    if stored != {key: array.to_json() for key, array in arrays.items()}:
        raise ArtifactError("manifest.json: constants.arrays differs from the table inside the constants file "
                            "(dtype, offset or shape changed)")
    start = (end + 1 + 63) // 64 * 64
    layout = {}
    for key, array in arrays.items():
        count = 1
        for dim in array.shape:
            count *= dim
        offset = start + array.offset
        if offset + count * DTYPE_SIZES[array.dtype] > len(blob):
            raise ArtifactError(f"manifest.json: constants.arrays.{key}: extends past the end of the constants file")
        layout[key] = (array.dtype, offset, tuple(array.shape))
    return layout


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
