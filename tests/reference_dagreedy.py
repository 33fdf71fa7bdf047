"""Plain-Python twin of ``groupers/dagreedy.rs``: DAGreedy (Pacaci and Özsu, BeyondMR 2018)
as ``docs/baselines.md`` specifies it, with the choices documented in the Rust module.

Written for reading: every window quantity is recomputed from the list of panes.
``Window`` is shared with the Dalton twin (``reference_dalton.py``).
"""

from __future__ import annotations

from reference import fingerprint, h


class Window:
    """The current pane and up to ``panes`` closed ones. A pane is a list of
    ``(fingerprint, worker)``, one per tuple routed in it."""

    def __init__(self, workers: int, panes: int) -> None:
        self.workers = workers
        self.panes = panes
        self.closed: list[list[tuple[int, int]]] = []
        self.current: list[tuple[int, int]] = []

    def tuples(self) -> list[tuple[int, int]]:
        return [t for pane in self.closed for t in pane] + self.current

    def record(self, item: int, worker: int) -> None:
        self.current.append((item, worker))

    def slide(self) -> None:
        self.closed.append(self.current)
        self.current = []
        if len(self.closed) > self.panes:
            self.closed.pop(0)

    def load(self, worker: int) -> int:
        return sum(1 for _, w in self.tuples() if w == worker)

    def total(self) -> int:
        return len(self.tuples())

    def holders(self, item: int) -> list[int]:
        """Workers that received ``item`` in the window, in index order."""
        return sorted({w for i, w in self.tuples() if i == item})


class DaGreedyTwin:
    def __init__(self, workers: int, seed: int = 0, interval_tuples: int = 100_000, window_panes: int = 10) -> None:
        self.workers = workers
        self.seed = seed
        self.interval_tuples = interval_tuples
        self.loads = [0] * workers
        self.window = Window(workers, window_panes)
        self.interval = 0  # the current interval's number
        self.in_interval = 0  # tuples routed in the current interval
        self.previous_total = 0  # tuples of the previous interval (0: none yet)
        self.counts: dict[int, int] = {}  # exact counts of this interval
        self.hot: dict[int, int] = {}  # hot key -> last interval it was found hot in

    def is_hot(self, item: int) -> bool:
        self.counts[item] = self.counts.get(item, 0) + 1
        # Hot when its count exceeds T / (100 n); no key is hot while T = 0.
        if self.previous_total > 0 and self.counts[item] * 100 * self.workers > self.previous_total:
            self.hot[item] = self.interval
            return True
        return item in self.hot  # found hot in this interval or the previous one

    def score(self, item: int, worker: int) -> float:
        """0.5 [k on w] - 0.5 (L_w - avg) / avg, the load term 0 when avg = 0."""
        on = 1.0 if worker in self.window.holders(item) else 0.0
        avg = self.window.total() / self.workers
        load_term = 0.0 if avg == 0 else (self.window.load(worker) - avg) / avg
        return 0.5 * on - 0.5 * load_term

    def best_worker(self, item: int) -> int:
        # The score's order, compared exactly: [k on w] * sum(L) - n * L_w (see the module).
        total = self.window.total()
        holders = self.window.holders(item)
        scores = [(total if w in holders else 0) - self.workers * self.window.load(w) for w in range(self.workers)]
        return scores.index(max(scores))  # ties to the lowest index

    def route(self, key: str | bytes | int) -> int:
        item = fingerprint(key)
        if self.is_hot(item):
            worker = self.best_worker(item)
        else:
            worker = h(0, key, self.seed) % self.workers
        self.window.record(item, worker)
        self.loads[worker] += 1
        self.in_interval += 1
        if self.in_interval >= self.interval_tuples:
            self.end_window()
        return worker

    def end_window(self) -> None:
        self.previous_total = self.in_interval
        self.in_interval = 0
        self.interval += 1
        self.counts = {}
        last = self.interval - 1
        self.hot = {k: found for k, found in self.hot.items() if found == last}
        self.window.slide()


TWINS = {"dagreedy": DaGreedyTwin}
