"""The loader of every generated host: ``load`` (verify, then build), ``from_verified``, the
shape-guarded sub-DNN, and the script entry point (``python host.py``).

A real module (linted, imported by tests) that ``hostgen.emit`` copies into every ``host.py``
after ``hostgen/host_runtime.py`` (``hostgen.copies``: without this docstring and the
``# dycl only`` lines, which stand for names the host defines elsewhere: the manifest and
artifact checks before it, the backend's runtime, the tables, and the emitted ``Model``).
``load`` and ``from_verified`` are the one loader of an artifact, which ``dycl.load`` and
``dycl.compile`` call in the host module they execute.

Guarantees: ``load`` verifies the manifest and every file it lists (and that the host file
running is the artifact's) before any file is used.
"""

import os
import sys

import numpy as np
from dycl.hostgen.artifact_check import constant_layout, verified_artifact  # dycl only
from dycl.hostgen.host_runtime import SUB_DNNS, HostModel  # dycl only
from dycl.hostgen.manifest import (  # dycl only
    DYCL_VERSION,  # dycl only
    HOST_FILE,  # dycl only
    MANIFEST_FILE,  # dycl only
    ArtifactError,  # dycl only
    ShapeGuardError,  # dycl only
    check_shape_guard,  # dycl only
)  # dycl only

PARAMETERS = []  # dycl only
Model = HostModel  # dycl only


# in a host, the backend's runtime defines these (hostgen imports no backend)  # dycl only
def runtime_options(**options):  # dycl only
    raise NotImplementedError("a host gets runtime_options from its backend's runtime")  # dycl only


def load_executable(data, entry, options):  # dycl only
    raise NotImplementedError("a host gets load_executable from its backend's runtime")  # dycl only


def load(artifact_dir, threads=None, providers=None, session_options=None, shared_pool=None, specialize=None):
    """Load a saved artifact directory. The manifest and every file it lists are
    checked (schema, plain names inside the directory, sha256) before any is used.
    The keyword arguments set how sub-DNNs run (``runtime_options``); none of them
    changes process-wide state except ``shared_pool=True``, which opts in to one
    ONNX Runtime thread pool for the whole process. ``specialize=False``: no sessions
    specialized to the sizes seen (ONNX Runtime; also ``DYCL_ORT_SPECIALIZE=off``)."""
    manifest, files = verified_artifact(artifact_dir, DYCL_VERSION)
    own = globals().get("__file__")
    if own and os.path.isfile(own):  # imported from a file: it must be this artifact's host.py
        with open(own, "rb") as file:
            if file.read() != files[manifest.host.file]:
                raise ArtifactError(f"{own} is not the {HOST_FILE} of {artifact_dir}: load each artifact with "
                                    f"its own {HOST_FILE} (or with dycl.load)")
    return from_verified(manifest, files, threads=threads, providers=providers,
                         session_options=session_options, shared_pool=shared_pool, specialize=specialize)


def from_verified(manifest, files, executable=None, **options):
    """The model of a ``Manifest`` and the file contents it lists (as
    ``verified_artifact`` returns them, or as dycl compiled them). Each file is
    loaded once (identical sub-DNNs share it) by the runtime's ``load_executable``,
    or by ``executable(name, data, entry)`` where given (dycl's in-process torch
    backend); ``options`` go to ``runtime_options``."""
    called = {name for variants in SUB_DNNS.values() for name in variants.values()}
    missing = sorted(called - set(manifest.sub_dnns))
    if missing:
        raise ArtifactError(f"{MANIFEST_FILE}: sub_dnns: missing {missing}, which {HOST_FILE} calls")
    if manifest.per_sample and options.get("specialize") is None:
        # a batch's groups change size from call to call: a session per size would be created in
        # the middle of serving and seldom reused (benchmarks/batch.md, 2026-11-28)
        options["specialize"] = False
    runtime = runtime_options(**options)
    executables = {}
    loaded = {}
    for name, entry in manifest.sub_dnns.items():
        if not entry.outputs:  # nothing to compute: its outputs are statics the host holds (Note: static outputs)
            loaded[entry.file] = _nothing_to_run
        if entry.file not in loaded:
            data = files[entry.file]
            loaded[entry.file] = (load_executable(data, entry, runtime) if executable is None
                                  else executable(name, data, entry))
        executables[name] = loaded[entry.file]
    executables = {name: _Guarded.of(name, manifest.sub_dnns, executables) if entry.guards else executables[name]
                    for name, entry in manifest.sub_dnns.items()}
    constants = {}
    if manifest.constants is not None:
        blob = files[manifest.constants.file]
        for key, (dtype, offset, shape) in constant_layout(blob, manifest.constants.arrays).items():
            count = 1
            for dim in shape:
                count *= dim
            constants[key] = np.frombuffer(blob, dtype=dtype, count=count, offset=offset).reshape(shape)
    return Model(executables, manifest, constants)  # the host's, which adds the emitted method


def _nothing_to_run(*args):
    """A sub-DNN variant with no output ports.

    Note: static outputs. A graph whose outputs are all statics (``None`` masks, devices,
    strings) computes nothing the host needs, and ONNX Runtime refuses to load a graph
    with no outputs: it is never loaded nor run. Its shape guards, where it has any, are
    still checked (``_Guarded``): they say for which sizes the statics hold."""
    return ()


class _Guarded:
    """A sub-DNN whose graph is valid only for sizes where its shape guards hold
    (``ShapeGuard``): checks them before each call and runs the first graph of its
    chain of alternatives (``SubDNNEntry.otherwise``) whose guards hold; where none
    does, raises the first graph's ``ShapeGuardError``."""

    def __init__(self, chain):
        self.chain = chain  # [(name, guards, executable)], the entry first

    @classmethod
    def of(cls, name, entries, executables):
        chain = []
        while name is not None:  # the manifest checked that the chain ends
            chain.append((name, entries[name].guards, executables[name]))
            name = entries[name].otherwise
        return cls(chain)

    def __call__(self, *args):
        first = None
        for name, guards, executable in self.chain:
            try:
                for guard in guards:
                    check_shape_guard(guard, args, name)
            except ShapeGuardError as error:
                first = first or error
                continue
            return executable(*args)
        raise first


def flat_outputs(value, name="output"):
    """``[(name, value)]``: the arrays and Python values in a (nested) output, each
    named by its position (``output_0``, ``output_1_0``, ...)."""
    if isinstance(value, (tuple, list)):
        return [item for position, inner in enumerate(value) for item in flat_outputs(inner, f"{name}_{position}")]
    if isinstance(value, dict):
        return [item for key, inner in value.items() for item in flat_outputs(inner, f"{name}_{key}")]
    return [(name, value)]


def _main(argv=None):
    import argparse  # only when run as a script

    directory = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        prog="python host.py", description=f"Run the dycl-compiled model of this artifact on inputs "
        f"saved with numpy.save, one .npy file per argument of forward({', '.join(PARAMETERS)}), and save "
        f"its outputs (named output, output_0, output_1_0, ... by position) to an .npz file. The artifact "
        f"directory is this file's: {directory}. See README.md there.")
    parser.add_argument("inputs", nargs="*", metavar="INPUT.npy", help="one array per argument, in order")
    parser.add_argument("--out", required=True, metavar="OUT.npz", help="where to write the outputs")
    parser.add_argument("--threads", type=int, help="threads per sub-DNN (default: every CPU)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    args = parser.parse_args(argv)
    try:
        model = load(directory, threads=args.threads)
        inputs = [np.load(path, allow_pickle=False) for path in args.inputs]
        arrays = {name: np.asarray(value) for name, value in flat_outputs(model(*inputs)) if value is not None}
        np.savez(args.out, **arrays)
    except Exception as error:  # one line for a person at a shell; --debug for the traceback
        if args.debug:
            raise
        lines = str(error).strip().splitlines()
        print(f"host.py: error: {type(error).__name__}: {lines[0] if lines else ''}", file=sys.stderr)
        return 1
    for name, value in arrays.items():
        print(f"{name}: {value.dtype} {list(value.shape)}")
    return 0
