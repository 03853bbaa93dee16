"""Trust and measurement: the consistency harness, the self-check every compile ends with,
coverage of branches, execution paths, timing and profiles.

The package's public names are the harness's (``consistency``): ``dycl.harness.check`` measures a
compiled model's inconsistent rate and numeric error against eager PyTorch.
"""

from dycl.harness.consistency import (
    Report,
    check,
    default_postprocess,
    log_error,
    max_abs_error,
    positional_arguments,
    traced_baseline,
)

__all__ = ["Report", "check", "default_postprocess", "log_error", "max_abs_error", "positional_arguments",
           "traced_baseline"]
