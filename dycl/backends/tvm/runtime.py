"""The Apache TVM part of the generated host: a real module, copied into host.py verbatim
(``hostgen.copies``: less this docstring) and imported by the in-process backend when a
model is loaded (importing it loads TVM).

Each compiled sub-DNN is the bytes of a shared library exported by
``relax.build(...).export_library``; the host writes it to a temporary file,
``dlopen``s it with ``tvm.runtime.load_module`` and runs its ``main`` on the
Relax virtual machine. Loading needs the TVM runtime and numpy only: no C
compiler, no TVM compiler library, no torch. The compiled function's
parameters are named ``in<position>`` (position in the manifest's input list),
so inputs the exporter dropped are skipped without guessing.

A Relax VM holds per-call state (its register file), so each thread that calls
an executable gets a VM of its own over the one loaded library. TVM's thread
pool is process-wide: ``TVM_NUM_THREADS`` (or ``DYCL_THREADS``) before the first
load sets its size; ``load(threads=...)`` is refused rather than ignored.
"""

import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import threading

import numpy as np


def _import_tvm():
    """Import the TVM runtime for the host.

    Where torch cannot be imported (a deployment without PyTorch, or the
    torch-free test process), only libtvm_runtime is loaded (TVM_USE_RUNTIME_LIB=1:
    about 1 s instead of 3 to 8 s, and no LLVM). tvm_ffi imports torch whenever it
    is installed; the host never needs it, so torch is hidden while TVM loads.
    """
    if "tvm" in sys.modules:  # in-process: the compiler already loaded TVM
        import tvm
        return tvm
    try:
        torch_missing = sys.modules.get("torch", 0) is None or importlib.util.find_spec("torch") is None
    except (ImportError, ValueError):
        torch_missing = True
    saved_env = {key: os.environ.get(key) for key in ("TVM_USE_RUNTIME_LIB", "TVM_NUM_THREADS")}
    if torch_missing:
        os.environ["TVM_USE_RUNTIME_LIB"] = "1"
    if os.environ.get("DYCL_THREADS") and not saved_env["TVM_NUM_THREADS"]:
        os.environ["TVM_NUM_THREADS"] = os.environ["DYCL_THREADS"]
    hide_torch = "torch" not in sys.modules
    if hide_torch:
        sys.modules["torch"] = None
    try:
        import tvm
        import tvm.runtime.vm
    finally:
        if hide_torch:
            del sys.modules["torch"]
        for key, value in saved_env.items():
            if key == "TVM_NUM_THREADS" and value is None:
                continue  # the thread pool reads it lazily, on first use
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return tvm


_tvm = _import_tvm()
_LIBRARIES = {}  # sha256 of the library -> loaded module (identical sub-DNNs share one file)


def _load_library(data):
    key = hashlib.sha256(data).hexdigest()
    library = _LIBRARIES.get(key)
    if library is None:
        handle, path = tempfile.mkstemp(prefix="dycl-tvm-", suffix=".so")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            library = _tvm.runtime.load_module(path)
        finally:
            os.unlink(path)  # dlopen keeps the mapping
        _LIBRARIES[key] = library
    return library


def _aligned_copy(array):
    """A C-contiguous copy at a 64-byte boundary (what TVM's kernels assume)."""
    buffer = np.empty(array.nbytes + 64, np.uint8)
    offset = -buffer.ctypes.data % 64
    copy = buffer[offset:offset + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def _tensor(value, dtype):
    """A TVM tensor over ``value``'s memory where it is contiguous, aligned and
    writable (DLPack cannot mark read-only), else over an aligned copy. About 1 us
    against 20 to 40 us for ``tvm.runtime.tensor`` (an allocation and a copy)."""
    array = np.asarray(value, dtype=dtype)
    if not (array.flags.c_contiguous and array.flags.writeable and array.ctypes.data % 64 == 0 and array.size):
        array = _aligned_copy(array)
    return _tvm.runtime.from_dlpack(array)


def runtime_options(threads=None, providers=None, session_options=None, shared_pool=None, specialize=None):
    """Load settings; the TVM host has none of its own (see the module docstring). ``specialize``
    (an ONNX Runtime setting) is ignored: a TVM library is built for its sizes at compile."""
    given = {"threads": threads, "providers": providers, "session_options": session_options,
             "shared_pool": shared_pool or None}
    refused = sorted(key for key, value in given.items() if value is not None)
    if refused:
        raise ValueError(f"the TVM host does not take {', '.join(refused)}: TVM has one process-wide thread "
                         f"pool, sized by TVM_NUM_THREADS before the first load")
    return {}


class _Executable:
    """One compiled sub-DNN on the Relax VM: parameter order and dtypes resolved
    once; one VM per calling thread."""

    def __init__(self, data, entry):
        self.library = _load_library(data)
        self.local = threading.local()
        vm = self._vm()
        arity = vm._get_function_arity("main")
        names = [vm._get_function_param_name("main", i) for i in range(arity)]
        if not all(name.startswith("in") and name[2:].isdigit() for name in names):
            raise RuntimeError(f"unexpected parameters {names} in a dycl TVM library (rebuild the artifact)")
        self.inputs = [(int(name[2:]), np.dtype(entry.inputs[int(name[2:])].dtype)) for name in names]
        self.single = len(entry.outputs) == 1

    def _vm(self):
        main = getattr(self.local, "main", None)
        if main is None:
            vm = _tvm.runtime.vm.VirtualMachine(self.library, _tvm.cpu())
            self.local.vm, main = vm, vm["main"]
            self.local.main = main
        return self.local.vm

    def __call__(self, *args):
        main = getattr(self.local, "main", None)
        if main is None:
            self._vm()
            main = self.local.main
        result = main(*[_tensor(args[position], dtype) for position, dtype in self.inputs])
        # copies, not views: a result may be a constant of the library or an input passed through
        return [np.from_dlpack(t).copy() for t in ([result] if self.single else result)]


class _Specialized:
    """A sub-DNN built for its example's shapes and for any shape (``specialized.py``):
    the first runs whenever the inputs have those shapes."""

    def __init__(self, static, generic, shapes):
        self.static, self.generic = static, generic
        self.shapes = [(position, tuple(shape)) for position, shape in shapes]

    def __call__(self, *args):
        for position, shape in self.shapes:
            if np.shape(args[position]) != shape:
                return self.generic(*args)
        return self.static(*args)


_SPECIALIZED = b"DYCL-TVM-SPECIALIZED\n"


def load_executable(data, entry, options=None):
    if not data.startswith(_SPECIALIZED):
        return _Executable(data, entry)
    end = data.index(b"\n", len(_SPECIALIZED))
    header = json.loads(data[len(_SPECIALIZED):end])
    body = data[end + 1:]
    static, generic = body[:header["static_bytes"]], body[header["static_bytes"]:]
    return _Specialized(_Executable(static, entry), _Executable(generic, entry), header["shapes"])
