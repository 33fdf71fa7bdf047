"""Plain-Python reference twins of the groupers, written for reading, not speed.

Each twin follows its specification step by step (``docs/baselines.md`` for the
baselines) and hashes with Python's ``xxhash`` package, an implementation independent of
the Rust core. The differential tests route the same streams through both.
"""

from __future__ import annotations

import xxhash

MASK64 = (1 << 64) - 1
SEED_STRIDE = 0x9E3779B97F4A7C15
FINGERPRINT_SEED = int.from_bytes(b"keysplit", "little")


def key_bytes(key: str | bytes | int) -> bytes:
    """Strings as UTF-8, integers widened to 64 bits, little-endian."""
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    return (key & MASK64).to_bytes(8, "little")


def h(index: int, key: str | bytes | int, seed: int) -> int:
    """``h_index(k)`` for a grouper seeded with ``seed``."""
    return xxhash.xxh3_64_intdigest(key_bytes(key), seed=candidate_seed(seed, index))


def candidate_seed(seed: int, index: int) -> int:
    """The seed of ``h_index`` for a grouper seeded with ``seed``."""
    return (seed * SEED_STRIDE + index) & MASK64


class SplitMix64:
    """Steele, Lea and Flood's generator, as ``rng.rs``."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    @classmethod
    def for_grouper(cls, seed: int, stream: int) -> SplitMix64:
        """Random stream ``stream`` of a grouper seeded with ``seed``, as
        ``SplitMix64::for_grouper``: started from the first output of the generator
        seeded with ``candidate_seed(seed, stream)``."""
        return cls(cls(candidate_seed(seed, stream)).next_u64())

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def next_f64(self) -> float:
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))

    def uniform(self, m: int) -> int:
        """``floor(x * m / 2^64)`` for the next draw ``x``."""
        return (self.next_u64() * m) >> 64


def fingerprint(key: str | bytes | int) -> int:
    """The 64-bit identity under which sketches and routing tables store a key."""
    return xxhash.xxh3_64_intdigest(key_bytes(key), seed=FINGERPRINT_SEED)


class SpaceSavingTwin:
    """Space-Saving (Metwally et al., ICDT 2005) exactly as ``sketches/space_saving.rs``
    specifies it: a list of ``[item, count, error, stamp]`` scanned at every insertion.

    A new item takes over the counter with the smallest ``(count, stamp)``, where the
    stamp is the number of the insertion that last changed that counter.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.counters: list[list[int]] = []
        self.step = 0
        self.total = 0

    def insert(self, item: int, weight: int = 1) -> None:
        if weight == 0:
            return
        t = self.step
        self.step += 1
        self.total += weight
        for counter in self.counters:
            if counter[0] == item:
                counter[1] += weight
                counter[3] = t
                return
        if len(self.counters) < self.capacity:
            self.counters.append([item, weight, 0, t])
            return
        victim = min(self.counters, key=lambda c: (c[1], c[3]))
        victim[:] = [item, victim[1] + weight, victim[1], t]

    def estimate(self, item: int) -> tuple[int, int] | None:
        """``(count, error)`` of a monitored item, None otherwise."""
        for counter in self.counters:
            if counter[0] == item:
                return counter[1], counter[2]
        return None

    def by_count(self) -> list[tuple[int, int, int]]:
        """``(item, count, error)``, largest count first, then smallest stamp."""
        ordered = sorted(self.counters, key=lambda c: (-c[1], c[3]))
        return [(c[0], c[1], c[2]) for c in ordered]

    def clear(self) -> None:
        self.counters.clear()
        self.step = 0
        self.total = 0


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
    """PKG, and PK-M with ``choices = M`` candidates (the holistic paper's PK-5)."""

    def __init__(self, workers: int, seed: int = 0, distinct_candidates: bool = True, choices: int = 2) -> None:
        self.workers = workers
        self.seed = seed
        self.distinct_candidates = distinct_candidates
        self.choices = choices
        self.loads = [0] * workers

    def candidates(self, key: str | bytes | int) -> tuple[int, ...]:
        c1 = h(1, key, self.seed) % self.workers
        c2 = h(2, key, self.seed) % self.workers
        if self.distinct_candidates and c2 == c1:
            c2 = (c2 + 1) % self.workers
        rest = tuple(h(i, key, self.seed) % self.workers for i in range(3, self.choices + 1))
        return (c1, c2, *rest)

    def route(self, key: str | bytes | int) -> int:
        worker = min(self.candidates(key), key=lambda c: self.loads[c])  # first of the least
        self.loads[worker] += 1
        return worker


# The twins of this module, by grouper name. Families with a module of their own
# (tests/reference_<family>.py) test against their twins in tests/test_<family>.py.
TWINS = {"shuffle": ShuffleTwin, "key": KeyTwin, "pkg": PkgTwin}


def all_twins() -> dict[str, type]:
    """Every family's twins, from the ``TWINS`` of each ``tests/reference*.py``, by name."""
    import importlib
    from pathlib import Path

    twins: dict[str, type] = {}
    for module in sorted(Path(__file__).parent.glob("reference*.py")):
        twins |= importlib.import_module(module.stem).TWINS
    return twins
