"""Names in the generated host's code that more than one module writes or reads,
each defined once here (the artifact's file names belong to its format and are
defined in ``hostgen/manifest.py``, which the host holds a copy of).

Guarantees: the emitter (``hostgen.emit``) writes these names and every reader
(``dycl.artifact.outputs``, ``dycl.harness``, the host runtime's ``HostModel``, whose
use is checked by tests/hostgen/test_host_runtime.py) finds them by the same
constants.
"""

from dycl.hcfg.optimize import CONSTANTS

#: the method of the host's ``Model`` that runs the model's control flow on flat inputs
FORWARD = "_forward"
#: the ``Model`` attribute holding the stored constants, bound to the local ``CONSTANTS`` in ``FORWARD``
MODEL_CONSTANTS = "constants"

__all__ = ["CONSTANTS", "FORWARD", "MODEL_CONSTANTS"]
