"""Entry point of ``python -m dycl``."""

import sys

from dycl.cli import main

sys.exit(main())
