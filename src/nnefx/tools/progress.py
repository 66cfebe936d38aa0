"""Progress bars for work that can take more than a second or two (tqdm).

Shown only when all of these hold, so logs, pipes and tests never see them:

* standard error is a terminal (``isatty``);
* ``--quiet`` was not given (:func:`set_quiet`) and ``NNEFX_PROGRESS`` is not ``0``;
* the ``tqdm`` package is importable (a core dependency; without it nothing is shown);
* the work has lasted a second already (``delay``): quick commands print nothing extra.

``NNEFX_PROGRESS=1`` forces bars on where standard error is not a terminal (for tests and
for tools that capture a terminal).  Two shapes:

* :func:`bar` — work with a known count (``run --steps``, the runs of ``compare``);
* :func:`activity` — work with no count to offer (loading, converting, rendering): a line
  with what is being done and the time it has taken so far, ticking from a helper thread.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Seconds a piece of work must last before its bar appears.
DELAY = 1.0

_quiet = False


def set_quiet(quiet: bool) -> None:
    """``--quiet``: no progress bars from this process."""
    global _quiet
    _quiet = bool(quiet)


def enabled() -> bool:
    """Whether a bar would be shown now (see the module's conditions)."""
    if _quiet:
        return False
    forced = os.environ.get("NNEFX_PROGRESS")
    if forced == "0":
        return False
    if forced != "1":
        try:
            if not sys.stderr.isatty():
                return False
        except (AttributeError, ValueError):
            return False
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


class _Silent:
    """The bar when none is shown: same methods, nothing printed."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def bar(total: int | None, desc: str, unit: str = "it") -> Iterator[Any]:
    """A counting bar: ``with bar(n, "steps") as b: ... b.update()``."""
    if not enabled():
        yield _Silent()
        return
    from tqdm import tqdm

    b = tqdm(total=total, desc=desc, unit=unit, delay=DELAY, file=sys.stderr, leave=False,
             dynamic_ncols=True)
    try:
        yield b
    finally:
        b.close()


@contextmanager
def activity(desc: str) -> Iterator[None]:
    """An elapsed-time line for work with no count: ``with activity("loading x"): ...``."""
    if not enabled():
        yield
        return
    from tqdm import tqdm

    b = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", delay=DELAY, file=sys.stderr,
             leave=False, dynamic_ncols=True)
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.2):
            b.refresh()

    thread = threading.Thread(target=tick, name="nnefx-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        b.close()
