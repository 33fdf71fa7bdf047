"""Reference twin of ``pstream`` (Chen, Zhang, Jin, IEEE TC 2021), following
``docs/baselines.md`` and ``groupers/pstream.rs`` step by step.

Per tuple: draw a coin count (trailing ones of a SplitMix64 draw, capped at ``l``); if it
is at least ``r``, decay every predictor entry (in increasing fingerprint order, one draw
each, shift right with probability ``p``, drop empty entries) and then set bit ``count``
of the key's entry. A key with two or more bits set is hot and goes to the least-loaded
worker (or round robin); any other key goes to ``h_0(k) mod n``.
"""

from __future__ import annotations

from reference import SplitMix64, fingerprint, h

RNG_INDEX = int.from_bytes(b"pstream\0", "little")


def trailing_ones(value: int) -> int:
    count = 0
    while value & 1:
        count += 1
        value >>= 1
    return count


class PStreamTwin:
    def __init__(
        self,
        workers: int,
        seed: int = 0,
        l: int = 16,  # noqa: E741 (the paper's name)
        r: int = 6,
        p: float = 0.01,
        round_robin: bool = False,
    ) -> None:
        self.workers = workers
        self.seed = seed
        self.l = l
        self.r = r
        self.p = p
        self.round_robin = round_robin
        self.rng = SplitMix64.for_grouper(seed, RNG_INDEX)
        self.predictor: dict[int, int] = {}  # fingerprint -> bitset
        self.hot_tuples = 0
        self.loads = [0] * workers

    def is_hot(self, key: str | bytes | int) -> bool:
        return bin(self.predictor.get(fingerprint(key), 0)).count("1") >= 2

    def update(self, x: int, count: int) -> None:
        for entry in sorted(self.predictor):
            if self.rng.next_f64() < self.p:
                self.predictor[entry] >>= 1
            if self.predictor[entry] == 0:
                del self.predictor[entry]
        self.predictor[x] = self.predictor.get(x, 0) | (1 << count)

    def route(self, key: str | bytes | int) -> int:
        count = min(trailing_ones(self.rng.next_u64()), self.l)
        x = fingerprint(key)
        if count >= self.r:
            self.update(x, count)
        if self.is_hot(key):
            if self.round_robin:
                worker = self.hot_tuples % self.workers
                self.hot_tuples += 1
            else:
                worker = min(range(self.workers), key=lambda w: (self.loads[w], w))
        else:
            worker = h(0, key, self.seed) % self.workers
        self.loads[worker] += 1
        return worker

    def end_window(self) -> None:
        """The predictor decays by updates, not by windows."""


TWINS = {"pstream": PStreamTwin}
