"""The host runtime of the ``torch`` backend (copied into host.py by ``hostgen.copies``): the
torch backend runs its sub-DNN modules in-process only, so a saved host refuses to load."""


def runtime_options(threads=None, providers=None, session_options=None, shared_pool=None, specialize=None):
    return None


def load_executable(data, entry, options=None):
    raise RuntimeError("this artifact was compiled with backend='torch', which runs only in-process; "
                       "compile with backend='onnxruntime' to deploy")
