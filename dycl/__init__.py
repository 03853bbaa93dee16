"""dycl: compile PyTorch networks with data-dependent control flow.

    compiled = dycl.compile(model, example_input)    # every branch compiled ahead of time
    y = compiled(x)                                  # same call and results as model(x)
    compiled.save("build/net")                       # host.py + manifest.json + sub-DNNs
    net = dycl.load("build/net")
"""

from dycl.api import CompiledModel, compile, load
from dycl.harness import Report, check
from dycl.harness.self_check import SelfCheckError
from dycl.hostgen.manifest import DYCL_VERSION
from dycl.in_process.config_guard import StaleConfigError
from dycl.in_process.dtype_guard import StaleDefaultDtypeError
from dycl.in_process.staleness import StaleWeightsError
from dycl.in_process.structure_guard import StaleStructureError
from dycl.model.model_state import ModelStateError, TrainingModeError
from dycl.rewriter import RewrittenFunction, rewrite
from dycl.rewriter.errors import SourceLocation, SpecialisationWarning, UnsupportedError

__version__ = DYCL_VERSION

__all__ = ["compile", "load", "check", "Report", "CompiledModel", "UnsupportedError", "SpecialisationWarning",
           "SourceLocation", "RewrittenFunction", "rewrite", "TrainingModeError", "ModelStateError",
           "StaleWeightsError", "StaleConfigError", "StaleStructureError", "StaleDefaultDtypeError",
           "SelfCheckError", "__version__"]
