"""Progress on stderr: rich displays when rich is installed and stderr is a terminal.

``progress=None`` everywhere means "when stderr is a terminal", so logs and pipes stay
clean; ``True`` asks for it regardless and ``False`` never shows it. The lines a long job
writes as each of its steps starts and ends (:meth:`PhaseProgress.step`) are the exception:
they are what a log of the job shows, so only ``False`` silences them.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
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
        # Printed output goes above the live line only when it shares the terminal with it:
        # redirected, a piped stdout would land on stderr.
        redirect_stdout=sys.stdout.isatty(),
    )


@dataclass
class Step:
    """A step of :meth:`PhaseProgress.step`: ``outcome``, when the step sets it, ends the
    line that says the step is done (``789,684 words``, the phase times of a pipeline)."""

    what: str
    outcome: str = ""


class PhaseProgress:
    """One line for a Spark job: its title, the windows done so far, the Spark action
    running now, and the time elapsed. A job is a few long actions, so a bar of
    actions done would sit still; naming the one that runs says where the time goes.

    Use it as a context manager; :meth:`phase` names the action, :meth:`window_done`
    counts a window. A job of several verbs (``keysplit run``) names its steps with
    :meth:`step`, which also writes a line on stderr as each starts and ends: the live line
    is a terminal's alone, and a log read later needs to say where the minutes went.
    """

    def __init__(self, title: str, enabled: bool | None) -> None:
        self.title = title
        self.enabled = enabled
        self.display = progress_display(enabled)
        self.task: Any = None
        self.windows = 0
        self.rows = 0
        self._current = ""
        self._step = ""
        self._started = time.perf_counter()

    def __enter__(self) -> PhaseProgress:
        self._started = time.perf_counter()
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

    def note(self, line: str) -> None:
        """``line`` on stderr after the job's title and elapsed time, above the live line
        where there is one (rich redraws it); nothing when progress is off."""
        if self.enabled is False:
            return
        elapsed = int(time.perf_counter() - self._started)
        line = f"{self.title} [{elapsed // 60}:{elapsed % 60:02d}] {line}"
        if self.display is None:
            print(line, file=sys.stderr, flush=True)
        else:
            self.display.console.print(line, markup=False, highlight=False)

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[Step]:
        """One step of a job: ``what …`` on stderr as it starts, ``what: done in 4.2 s`` and
        the step's ``outcome`` as it ends (``failed after 4.2 s`` when it raises); the live
        line names the step, then each Spark action it runs."""
        step = Step(what)
        self._step, self._current = what, ""
        self._show()
        self.note(f"{what} …")
        started = time.perf_counter()
        try:
            yield step
        except BaseException:
            self.note(f"{what}: failed after {time.perf_counter() - started:.1f} s")
            raise
        finally:
            self._step, self._current = "", ""
        outcome = f" ({step.outcome})" if step.outcome else ""
        self.note(f"{what}: done in {time.perf_counter() - started:.1f} s{outcome}")

    def window_done(self, rows: int) -> None:
        self.windows += 1
        self.rows += rows
        self._show(advance=1)

    def _description(self) -> str:
        done = f" · {self.windows:,} windows, {self.rows:,} rows" if self.windows else ""
        running = "".join(f" · {part}" for part in (self._step, self._current) if part)
        return f"{self.title}{done}{running}"

    def _show(self, advance: int = 0) -> None:
        if self.display is not None:
            self.display.update(self.task, description=self._description(), advance=advance, refresh=True)
