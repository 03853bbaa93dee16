"""A one-line progress indicator on stderr (only when stderr is a terminal)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, total: int, enabled: bool | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = time.perf_counter()

    def step(self, detail: str = "") -> None:
        self.done += 1
        if self.enabled:
            elapsed = time.perf_counter() - self.start
            sys.stderr.write(f"\r[dycl] {self.label} {self.done}/{self.total} ({elapsed:.1f} s) {detail[:40]:<40}")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()
