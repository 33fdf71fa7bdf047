"""Plain-Python twin of ``groupers/dalton.rs``: Dalton (Zapridou, Mytilinis and Ailamaki,
PVLDB 2022) as ``docs/baselines.md`` specifies it, with the choices documented in the Rust
module (interval, window, Q-row lifetime, reached set, exact tie rules).
"""

from __future__ import annotations

from reference import SplitMix64, fingerprint, h
from reference_dagreedy import Window

Q_INIT = -2.0
LEARNING_RATE = 0.1
RNG_STREAM = int.from_bytes(b"dalton\0\0", "little")


class DaltonTwin:
    def __init__(
        self,
        workers: int,
        seed: int = 0,
        interval_tuples: int = 100_000,
        window_panes: int = 10,
        epsilon: float = 0.1,
    ) -> None:
        self.workers = workers
        self.seed = seed
        self.interval_tuples = interval_tuples
        self.epsilon = epsilon
        self.rng = SplitMix64.for_grouper(seed, RNG_STREAM)
        self.loads = [0] * workers
        self.window = Window(workers, window_panes)
        self.interval = 0
        self.in_interval = 0
        self.previous_total = 0
        self.counts: dict[int, int] = {}
        self.q: dict[int, list[float]] = {}  # the Q-table: one row per hot key
        self.found: dict[int, int] = {}  # hot key -> last interval it was found hot in
        self.reached: set[int] = set()  # keys whose spread reached max_split
        self.max_split = 2

    def is_hot(self, item: int) -> bool:
        self.counts[item] = self.counts.get(item, 0) + 1
        if self.previous_total > 0 and self.counts[item] * self.workers > self.previous_total:
            if item not in self.q:
                self.q[item] = [Q_INIT] * self.workers
            self.found[item] = self.interval
            return True
        return item in self.q

    def choose_hot(self, item: int, key: str | bytes | int) -> int:
        hash_worker = h(0, key, self.seed) % self.workers
        if self.rng.next_f64() < self.epsilon:  # explore
            if item in self.reached:
                holders = self.window.holders(item)
                if holders:
                    return holders[self.rng.uniform(len(holders))]
                self.reached.discard(item)
            return self.rng.uniform(self.workers)
        row = self.q[item]  # exploit: argmax, ties to the hash worker, then lowest index
        best = max(row)
        if row[hash_worker] == best:
            return hash_worker
        return row.index(best)

    def reward(self, item: int, worker: int) -> None:
        spread = len(self.window.holders(item))
        if spread == self.max_split:
            self.reached.add(item)
        n = float(self.workers)
        load = float(self.window.load(worker))
        avg = self.window.total() / n
        cost_map = (load - avg) / max(load, avg)
        cost_reduce = spread / n
        reached_rows = len(self.reached & self.q.keys())
        if 10 * reached_rows >= 7 * len(self.q) and self.max_split < 6:
            self.reached.clear()
            self.max_split += 1
        r = -(0.5 * cost_map + 0.5 * cost_reduce)
        self.q[item][worker] = self.q[item][worker] * (1.0 - LEARNING_RATE) + LEARNING_RATE * r

    def route(self, key: str | bytes | int) -> int:
        item = fingerprint(key)
        hot = self.is_hot(item)
        worker = self.choose_hot(item, key) if hot else h(0, key, self.seed) % self.workers
        self.window.record(item, worker)
        self.loads[worker] += 1
        if hot:
            self.reward(item, worker)
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
        for item in [k for k, found in self.found.items() if found != last]:
            del self.found[item]
            del self.q[item]
        self.window.slide()
        self.reached = {k for k in self.reached if self.window.holders(k)}


TWINS = {"dalton": DaltonTwin}
