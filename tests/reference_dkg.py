"""Plain-Python reference twin of Dynamic Key Grouping, written for reading, not speed.

Dalabasmaz and Can, "Dynamic Key Grouping: A Load Balancing Algorithm for Distributed Stream
Processing Engines": the Key Space (Section 4.1, Algorithms 1-3), the threshold (Section
4.3, Eq. 3-4, Table 1) and chooseBestTask with scale out and scale down (Algorithms 4-6),
with the choices documented in ``rust/keysplit-core/src/groupers/dkg.rs``:

* time is counted in windows of ``window_tuples`` tuples (one 15-second cycle each);
  ``end_window()`` closes one early; every ``old_cycle_windows``-th window also promotes
  teenage -> old; the warm-up is over after ``warmup_windows`` windows;
* Algorithm 3 first fills a destination that has room, then swaps while the source's first
  count is strictly higher than the destination's last;
* a key's width lives in its Key Item and is capped at Table 1's maximum.
"""

from __future__ import annotations

import math

from reference import fingerprint, h


def ideal_load(machines: int) -> float:
    """Eq. 3: ``Li = 100 / m`` percent."""
    return 100.0 / machines


def threshold_load(machines: int) -> float:
    """Eq. 4: ``Ls = Li + sqrt(Li)`` percent."""
    li = ideal_load(machines)
    return li + math.sqrt(li)


def max_machines(machines: int) -> int:
    """Table 1's last column: ``min(m, floor(100 / Ls) + 1)``."""
    return min(machines, math.floor(100.0 / threshold_load(machines)) + 1)


def threshold_table(machines: list[int]) -> list[tuple[int, float, float, int]]:
    """Table 1: (machines, ideal load, threshold load, max machines)."""
    return [(m, ideal_load(m), threshold_load(m), max_machines(m)) for m in machines]


class KeyItem:
    def __init__(self, width: int) -> None:
        self.count = 0
        self.width = width
        self.space = "baby"


class DkgTwin:
    def __init__(
        self,
        workers: int,
        seed: int = 0,
        window_tuples: int = 15_000,
        old_cycle_windows: int = 4,
        warmup_windows: int = 1,
        expected_keys: int = 100,
    ) -> None:
        self.workers = workers
        self.seed = seed
        self.window_tuples = window_tuples
        self.old_cycle_windows = old_cycle_windows
        self.warmup_windows = warmup_windows
        # Section 4.1.2: 10% old, 40% teenage, 50% baby.
        self.old_size = expected_keys // 10
        self.teenage_size = expected_keys * 4 // 10
        self.baby_size = expected_keys // 2
        self.threshold = threshold_load(workers)
        self.max_width = max_machines(workers)
        self.initial_width = min(2, workers)
        self.items: dict[int, KeyItem] = {}
        self.baby: list[int] = []  # fingerprints, in space order
        self.teenage: list[int] = []
        self.old: list[int] = []
        self.loads = [0] * workers
        self.in_window = 0
        self.windows_closed = 0

    # -- accessors used by the tests --------------------------------------------------

    def first_worker(self, key: object) -> int:
        """Eq. 5: ``hash(key) % N_m``, with the single hash ``h_0``."""
        return h(0, key, self.seed) % self.workers

    def width(self, key: object) -> int:
        item = self.items.get(fingerprint(key))
        return self.initial_width if item is None else item.width

    def candidates(self, key: object) -> list[int]:
        first = self.first_worker(key)
        return [(first + i) % self.workers for i in range(self.width(key))]

    def space_of(self, key: object) -> str | None:
        item = self.items.get(fingerprint(key))
        return None if item is None else item.space

    def warmed_up(self) -> bool:
        """Algorithm 5, isWarmUp: the cold start is over."""
        return self.windows_closed >= self.warmup_windows

    # -- routing ------------------------------------------------------------------------

    def below_threshold(self, load: int) -> bool:
        total = sum(self.loads)
        percent = 0.0 if total == 0 else 100.0 * load / total
        return percent < self.threshold

    def choose_best_task(self, first: int, width: int, in_old: bool) -> tuple[int, int]:
        """Algorithm 4: the chosen worker and the key's new width."""
        # findBestCandidate: the least-loaded candidate, ties to the first in ring order.
        best, best_load, below = first, None, 0
        for i in range(width):
            worker = (first + i) % self.workers
            load = self.loads[worker]
            if self.below_threshold(load):
                below += 1
            if best_load is None or load < best_load:
                best, best_load = worker, load
        # Algorithm 5 (shouldScaleOut), capped at Table 1's maximum.
        should_scale_out = (
            self.warmed_up() and not self.below_threshold(best_load) and in_old and width < self.max_width
        )
        if should_scale_out:
            candidate = (first + width) % self.workers
            if self.loads[candidate] < best_load:
                return candidate, width + 1
            return best, width
        # Algorithm 6 (shouldScaleDown), then chooseBestTask again.
        if width > 2 and below >= 2:
            return self.choose_best_task(first, width - 1, in_old)
        return best, width

    def route(self, key: object) -> int:
        k = fingerprint(key)
        # Section 4.1.2: find the Key Item (old, teenage, baby), or create it in baby space.
        item = self.items.get(k)
        if item is None:
            item = KeyItem(self.initial_width)
            self.items[k] = item
            self.baby.append(k)
        item.count += 1
        worker, item.width = self.choose_best_task(self.first_worker(key), item.width, item.space == "old")
        self.loads[worker] += 1
        self.in_window += 1
        if self.in_window >= self.window_tuples:
            self.end_window()
        return worker

    # -- Key Space Manager --------------------------------------------------------------

    def sort_space(self, space: list[int]) -> None:
        space.sort(key=lambda k: -self.items[k].count)  # stable

    def promote(self, source: list[int], destination: list[int], size: int, to: str, back: str) -> None:
        """Algorithm 3, after filling a destination that has room (the authors' code)."""
        moves = 0
        while len(destination) < size and source:
            first = source.pop(0)
            destination.insert(0, first)
            self.items[first].space = to
            moves += 1
        while moves < size and source and destination:
            first, last = source[0], destination[-1]
            if self.items[first].count <= self.items[last].count:
                break  # the transition is complete
            source.pop(0)
            destination.pop()
            destination.insert(0, first)
            source.append(last)
            self.items[first].space = to
            self.items[last].space = back
            moves += 1

    def end_window(self) -> None:
        self.in_window = 0
        self.windows_closed += 1
        # Algorithm 1: promoteToTeenageSpace.
        self.sort_space(self.baby)
        for k in self.baby[self.baby_size :]:
            del self.items[k]
        del self.baby[self.baby_size :]
        self.sort_space(self.teenage)
        self.promote(self.baby, self.teenage, self.teenage_size, "teenage", "baby")
        # Algorithm 2: promoteToOldSpace, every old_cycle_windows windows.
        if self.windows_closed % self.old_cycle_windows == 0:
            self.sort_space(self.teenage)
            self.sort_space(self.old)
            self.promote(self.teenage, self.old, self.old_size, "old", "teenage")


TWINS = {"dkg": DkgTwin}
