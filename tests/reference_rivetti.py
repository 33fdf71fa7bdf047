"""Reference twin of ``dkg_rivetti``: distribution-aware key grouping (Rivetti et al.,
DEBS 2015), following ``docs/baselines.md`` and ``groupers/rivetti.rs`` step by step.

1. Learning: the first ``learning_tuples`` tuples go to ``h_0(k) mod n``; each key's
   fingerprint is counted in a SpaceSaving summary of ``4n`` counters and in ``2n``
   buckets chosen by ``g(x) = ((a*x + b) mod P) mod 2n``.
2. Building, right after the last learning tuple: heavy hitters (``count - error >=
   ceil(m / 2n)``) are taken out of their buckets, then heavy hitters and buckets are
   placed by LPT.
3. Routing: heavy hitters to their worker, other keys to their bucket's worker.
"""

from __future__ import annotations

from reference import SpaceSavingTwin, SplitMix64, fingerprint, h

PRIME = (1 << 61) - 1
RNG_INDEX = int.from_bytes(b"rivetti\0", "little")


class DkgRivettiTwin:
    def __init__(self, workers: int, seed: int = 0, learning_tuples: int = 100_000) -> None:
        self.workers = workers
        self.seed = seed
        self.learning_tuples = learning_tuples
        self.loads = [0] * workers
        # The 2-universal bucket hash.
        self.buckets = 2 * workers
        rng = SplitMix64.for_grouper(seed, RNG_INDEX)
        self.a = 1 + rng.next_u64() % (PRIME - 1)
        self.b = rng.next_u64() % PRIME
        # Learning state.
        self.summary = SpaceSavingTwin(4 * workers)
        self.bucket_counts = [0] * self.buckets
        self.seen = 0
        # The table, once built.
        self.built = False
        self.heavy: dict[int, int] = {}
        self.bucket_workers: list[int] = []

    def bucket(self, x: int) -> int:
        return ((self.a * x + self.b) % PRIME) % self.buckets

    def build(self) -> None:
        m = self.seen
        threshold = -(-m // (2 * self.workers))  # ceil(m / 2n)
        heavy = []
        for x, count, error in self.summary.by_count():
            weight = count - error
            if weight >= threshold:
                heavy.append((x, weight))
                b = self.bucket(x)
                self.bucket_counts[b] = max(0, self.bucket_counts[b] - weight)
        # LPT: largest weight first; ties: heavy hitters (kind 0) before buckets (kind 1),
        # then by fingerprint / bucket index.
        items = [(w, 0, x) for x, w in heavy]
        items += [(w, 1, i) for i, w in enumerate(self.bucket_counts)]
        items.sort(key=lambda item: (-item[0], item[1], item[2]))
        lpt = [0] * self.workers
        self.bucket_workers = [0] * self.buckets
        for weight, kind, ident in items:
            worker = min(range(self.workers), key=lambda w: (lpt[w], w))
            lpt[worker] += weight
            if kind == 0:
                self.heavy[ident] = worker
            else:
                self.bucket_workers[ident] = worker
        self.built = True

    def route(self, key: str | bytes | int) -> int:
        x = fingerprint(key)
        if self.built:
            worker = self.heavy.get(x, self.bucket_workers[self.bucket(x)])
        else:
            self.summary.insert(x)
            self.bucket_counts[self.bucket(x)] += 1
            self.seen += 1
            worker = h(0, key, self.seed) % self.workers
            if self.seen >= self.learning_tuples:
                self.build()
        self.loads[worker] += 1
        return worker

    def end_window(self) -> None:
        """DKG learns once; windows change nothing."""


TWINS = {"dkg_rivetti": DkgRivettiTwin}
