"""Plain-Python reference twins of the groupers, written for reading, not speed.

Each twin follows its specification step by step (``spec/baselines.md`` for the
baselines) and hashes with Python's ``xxhash`` package, an implementation independent of
the Rust core. The differential tests route the same streams through both.
"""

from __future__ import annotations

import xxhash

MASK64 = (1 << 64) - 1
SEED_STRIDE = 0x9E3779B97F4A7C15


def key_bytes(key: str | bytes | int) -> bytes:
    """Strings as UTF-8, integers widened to 64 bits, little-endian."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    return (key & MASK64).to_bytes(8, "little")


def h(index: int, key: str | bytes | int, seed: int) -> int:
    """``h_index(k)`` for a grouper seeded with ``seed``."""
    return xxhash.xxh3_64_intdigest(key_bytes(key), seed=(seed * SEED_STRIDE + index) & MASK64)


class ShuffleTwin:
    def __init__(self, workers: int, seed: int = 0) -> None:
        self.workers = workers
        self.tuples = 0
        self.loads = [0] * workers

    def route(self, key: object) -> int:
        worker = self.tuples % self.workers
        self.tuples += 1
        self.loads[worker] += 1
        return worker


class KeyTwin:
    def __init__(self, workers: int, seed: int = 0) -> None:
        self.workers = workers
        self.seed = seed
        self.loads = [0] * workers

    def route(self, key: str | bytes | int) -> int:
        worker = h(0, key, self.seed) % self.workers
        self.loads[worker] += 1
        return worker


class PkgTwin:
    def __init__(self, workers: int, seed: int = 0, distinct_candidates: bool = True) -> None:
        self.workers = workers
        self.seed = seed
        self.distinct_candidates = distinct_candidates
        self.loads = [0] * workers

    def candidates(self, key: str | bytes | int) -> tuple[int, int]:
        c1 = h(1, key, self.seed) % self.workers
        c2 = h(2, key, self.seed) % self.workers
        if self.distinct_candidates and c2 == c1:
            c2 = (c2 + 1) % self.workers
        return c1, c2

    def route(self, key: str | bytes | int) -> int:
        c1, c2 = self.candidates(key)
        worker = c2 if self.loads[c2] < self.loads[c1] else c1
        self.loads[worker] += 1
        return worker


TWINS = {"shuffle": ShuffleTwin, "key": KeyTwin, "pkg": PkgTwin}
