"""Reference twin of ``elastic``, keysplit's own grouper, following the rule in the module
documentation of ``groupers/elastic.rs`` step by step.

Per tuple with key ``k``: ``h = h_0(k)``, hash worker ``h mod n``. The key is counted in a
HeavyKeeper table (buckets of 4 entries, the bucket from the top bits of ``h``); a key
counted at least ``hot_count`` times goes to the least-loaded member of its worker set,
which grows by the globally least-loaded worker when every member is above the window's
mean by more than ``epsilon``; any other key goes to its hash worker. Every
``decay_tuples`` tuples the counts halve and the sets are trimmed to their key's share.
"""

from __future__ import annotations

from reference import SplitMix64, h

RNG_INDEX = int.from_bytes(b"elastic\0", "little")
WAYS = 4
MARK_TUPLES = 16
INFLOW = 0.9
DECAY_TABLE_LEN = 512
U32_MAX = (1 << 32) - 1


def decay_probabilities() -> list[float]:
    """``1.08^-c`` by repeated multiplication, as the Rust table."""
    step = 1.0 / 1.08
    table = [1.0]
    for _ in range(1, DECAY_TABLE_LEN):
        table.append(table[-1] * step)
    return table


DECAY = decay_probabilities()


class Entry:
    def __init__(self, fingerprint: int = 0, count: int = 0) -> None:
        self.fingerprint = fingerprint
        self.count = count
        # [members, hits, best, budget] once the key has grown past its hash worker.
        self.members: list[int] | None = None
        self.hits: list[int] = []
        self.best = 0
        self.budget = 0


class ElasticTwin:
    def __init__(
        self,
        workers: int,
        seed: int = 0,
        epsilon: float = 0.005,
        hot_count: int = 32,
        table_entries: int = 16384,
        decay_tuples: int = 100_000,
    ) -> None:
        self.n = workers
        self.seed = seed
        self.epsilon = epsilon
        self.hot_count = hot_count
        self.decay_tuples = decay_tuples
        self.table = [Entry() for _ in range(table_entries)]
        self.rng = SplitMix64.for_grouper(seed, RNG_INDEX)
        self.loads = [0] * workers
        self.window_start = [0] * workers
        self.window_tuples = 0
        self.since_decay = 0
        self.growth_factor = (1.0 + epsilon) / float(workers)
        self.slack_factor = epsilon / (2.0 * float(workers))
        self.inflow_factor = INFLOW / float(workers)
        # Per worker: the window's tuples and the worker's window load when a key last grew
        # off it.
        self.marks = [(0, 0)] * workers

    def bucket_of(self, x: int) -> int:
        buckets = len(self.table) // WAYS
        return (((x >> 32) * buckets) >> 32) * WAYS

    def count(self, x: int) -> Entry | None:
        first = self.bucket_of(x)
        bucket = self.table[first : first + WAYS]
        for entry in bucket:
            if entry.count > 0 and entry.fingerprint == x:
                entry.count = min(entry.count + 1, U32_MAX)
                return entry
        for way, entry in enumerate(bucket):
            if entry.count == 0:
                self.table[first + way] = Entry(x, 1)
                return self.table[first + way]
        way = min(range(WAYS), key=lambda w: (bucket[w].count, w))
        weakest = bucket[way]
        probability = DECAY[weakest.count] if weakest.count < DECAY_TABLE_LEN else 0.0
        if self.rng.next_f64() >= probability:
            return None
        weakest.count -= 1
        if weakest.count > 0:
            return None
        self.table[first + way] = Entry(x, 1)
        return self.table[first + way]

    def window_load(self, worker: int) -> int:
        return self.loads[worker] - self.window_start[worker]

    def threshold(self) -> float:
        return self.window_tuples * self.growth_factor

    def slack(self) -> int:
        return max(int(self.window_tuples * self.slack_factor), 1)

    def least_loaded_worker(self) -> int:
        return min(range(self.n), key=lambda w: (self.window_load(w), w))

    def may_grow_off(self, worker: int, load: int) -> bool:
        tuples, level = self.marks[worker]
        elapsed = self.window_tuples - tuples
        return elapsed >= MARK_TUPLES * self.n and (load - level) > elapsed * self.inflow_factor

    def grow_off(self, worker: int, load: int) -> int:
        self.marks[worker] = (self.window_tuples, load)
        return self.least_loaded_worker()

    def take(self, entry: Entry, member: int) -> int:
        entry.hits[member] = min(entry.hits[member] + 1, U32_MAX)
        assert entry.members is not None
        return entry.members[member]

    def route_hot(self, entry: Entry, hash_worker: int) -> int:
        if entry.members is None:
            load = self.window_load(hash_worker)
            if load <= self.threshold() or not self.may_grow_off(hash_worker, load):
                return hash_worker
            entry.members = [hash_worker, self.grow_off(hash_worker, load)]
            entry.hits = [0, 0]
            entry.best, entry.budget = 1, 0
            return self.take(entry, 1)
        if entry.budget > 0:
            entry.budget -= 1
            return self.take(entry, entry.best)
        loads = [self.window_load(w) for w in entry.members]
        best = min(range(len(loads)), key=lambda i: (loads[i], i))
        full = entry.members[best]
        if loads[best] > self.threshold() and len(entry.members) < self.n and self.may_grow_off(full, loads[best]):
            entry.members.append(self.grow_off(full, loads[best]))
            entry.hits.append(0)
            best = len(entry.members) - 1
        entry.best = best
        entry.budget = min(self.slack(), U32_MAX) - 1
        return self.take(entry, best)

    def decay(self) -> None:
        for index, entry in enumerate(self.table):
            if entry.count == 0:
                continue
            if entry.members is not None:
                recent = sum(entry.hits)
                share = recent / float(self.decay_tuples)
                if recent == 0:
                    entry.members, entry.hits = None, []
                    entry.best = entry.budget = 0
                else:
                    trim(entry, 2 * _ceil(share * float(self.n)) + 1)
            entry.count //= 2
            if entry.count == 0:
                self.table[index] = Entry()

    def route(self, key: str | bytes | int) -> int:
        x = h(0, key, self.seed)
        hash_worker = x % self.n
        entry = self.count(x)
        if entry is not None and entry.count >= self.hot_count:
            worker = self.route_hot(entry, hash_worker)
        else:
            worker = hash_worker
        self.loads[worker] += 1
        self.window_tuples += 1
        self.since_decay += 1
        if self.since_decay == self.decay_tuples:
            self.since_decay = 0
            self.decay()
        return worker

    def end_window(self) -> None:
        self.window_start = list(self.loads)
        self.window_tuples = 0
        self.marks = [(0, 0)] * self.n
        for entry in self.table:
            entry.budget = 0

    def worker_sets(self) -> dict[int, list[int]]:
        """Each tracked fingerprint's workers, hash worker first."""
        return {e.fingerprint: (e.members or [e.fingerprint % self.n]) for e in self.table if e.count > 0}


def _ceil(value: float) -> int:
    whole = int(value)
    return whole + 1 if whole < value else whole


def trim(entry: Entry, needed: int) -> None:
    """Drops the members beyond ``needed`` that took fewest tuples (the latest added first
    on ties, never the hash worker), and resets the hits of the others."""
    assert entry.members is not None
    if len(entry.members) > needed:
        order = sorted(range(1, len(entry.members)), key=lambda i: (entry.hits[i], -i))
        dropped = set(order[: len(entry.members) - needed])
        entry.members = [w for i, w in enumerate(entry.members) if i not in dropped]
        entry.hits = [c for i, c in enumerate(entry.hits) if i not in dropped]
    entry.hits = [0] * len(entry.hits)
    entry.best = 0
    entry.budget = 0


TWINS = {"elastic": ElasticTwin}
