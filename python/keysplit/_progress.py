"""Progress on stderr: rich displays when rich is installed and stderr is a terminal.

``progress=None`` everywhere means "when stderr is a terminal", so logs and pipes stay
clean; ``True`` asks for it regardless and ``False`` never shows it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType


def progress_display(enabled: bool | None) -> Any:
    """A rich ``Progress`` on stderr, or None when it is off, rich is missing, or (for
    ``enabled=None``) stderr is not a terminal."""
    if enabled is False or (enabled is None and not sys.stderr.isatty()):
        return None
    try:
        from rich.console import Console  # noqa: PLC0415 - optional dependency
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )
    except ImportError:
        return None
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )


class PhaseProgress:
    """One line for a Spark job: its title, the windows done so far, the Spark action
    running now, and the time elapsed. A job is a few long actions, so a bar of
    actions done would sit still; naming the one that runs says where the time goes.

    Use it as a context manager; :meth:`phase` names the action, :meth:`window_done`
    counts a window.
    """

    def __init__(self, title: str, enabled: bool | None) -> None:
        self.title = title
        self.display = progress_display(enabled)
        self.task: Any = None
        self.windows = 0
        self.rows = 0
        self._current = ""

    def __enter__(self) -> PhaseProgress:
        if self.display is not None:
            self.display.start()
            self.task = self.display.add_task(self._description(), total=None)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.display is not None:
            self.display.stop()

    def phase(self, what: str) -> None:
        self._current = what
        self._show()

    def window_done(self, rows: int) -> None:
        self.windows += 1
        self.rows += rows
        self._show(advance=1)

    def _description(self) -> str:
        done = f" · {self.windows:,} windows, {self.rows:,} rows" if self.windows else ""
        running = f" · {self._current}" if self._current else ""
        return f"{self.title}{done}{running}"

    def _show(self, advance: int = 0) -> None:
        if self.display is not None:
            self.display.update(self.task, description=self._description(), advance=advance, refresh=True)
