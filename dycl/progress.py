"""Progress bars for the long phases of ``dycl.compile`` (tqdm; a notebook widget in Jupyter).

Shown when someone is watching — stderr is a terminal, or the code runs in a
Jupyter kernel — or when asked (``progress=True``); ``progress=False`` and
non-interactive runs (tests, CI, pipes) print nothing. Jupyter gets tqdm's
widget when ``ipywidgets`` is installed and tqdm's text bar on stderr
otherwise. ``waiting(text)`` marks a phase of unknown length inside the
current bar (TVM tuning runs in a child process for minutes): a second bar
whose elapsed time ticks every second until the phase ends.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_CURRENT: ContextVar[Progress | None] = ContextVar("dycl_progress", default=None)


def interactive() -> bool:
    """Whether a person is probably watching: a terminal on stderr or a Jupyter kernel."""
    if "ipykernel" in sys.modules:
        shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
        if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":
            return True
    stream = sys.stderr
    return bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


def _tqdm() -> Any:
    try:
        import ipywidgets  # noqa: F401 - tqdm.auto needs it for the notebook widget
    except ImportError:
        from tqdm.std import tqdm
        return tqdm
    from tqdm.auto import tqdm
    return tqdm


class Progress:
    """One bar of ``total`` steps labelled ``label``; ``step(detail)`` advances it."""

    def __init__(self, label: str, total: int, enabled: bool | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.enabled = interactive() if enabled is None else enabled
        self._bar = _tqdm()(total=total, desc=f"[dycl] {label}", disable=not self.enabled, file=sys.stderr,
                            leave=True, dynamic_ncols=True) if self.enabled and total > 0 else None

    def step(self, detail: str = "") -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.set_postfix_str(detail[:40], refresh=False)
            self._bar.update(1)
            if self.done >= self.total:
                self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    @contextmanager
    def active(self) -> Iterator[Progress]:
        """Make this the bar that ``waiting`` reports under, for the duration of the block."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)


@contextmanager
def waiting(text: str) -> Iterator[None]:
    """A ticking bar for a phase of unknown length, when the current ``Progress`` is shown."""
    current = _CURRENT.get()
    if current is None or not current.enabled:
        yield
        return
    bar = _tqdm()(total=None, desc=f"[dycl] {text}", file=sys.stderr, leave=True, bar_format="{desc}: {elapsed}")
    done = threading.Event()

    def tick() -> None:
        while not done.wait(1.0):
            bar.refresh()

    ticker = threading.Thread(target=tick, name="dycl-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        bar.close()


__all__ = ["Progress", "interactive", "waiting"]
