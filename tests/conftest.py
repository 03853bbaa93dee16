"""Suite-wide settings: every HCFG pass checks the graph it returns (``DYCL_CHECK``,
``hcfg.passes``), so a pass that breaks an invariant fails the test that ran it
with the node and the invariant named, not as a wrong output further on.
``DYCL_CHECK=0 python -m pytest ...`` turns it off."""

from __future__ import annotations

import os

os.environ.setdefault("DYCL_CHECK", "1")
