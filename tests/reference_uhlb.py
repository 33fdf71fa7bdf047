"""Plain-Python reference twin of ``uhlb``, universal-hash grouping (the baseline UHLB of
the ELB/CLB paper, Section 5; ``spec/baselines.md``, "Universal-hash grouping").

A key ``k`` goes to ``((a * x + b) mod P) mod n`` with ``x = h_0(k)``, ``P = 2**61 - 1``,
and ``a``, ``b`` drawn from SplitMix64 as ``groupers/uhlb.rs`` documents.
"""

from __future__ import annotations

from reference import MASK64, SEED_STRIDE, h

PRIME = (1 << 61) - 1
RNG_STREAM = int.from_bytes(b"uhlb\0\0\0\0", "little")


class SplitMix64:
    """Steele, Lea and Flood's generator, as ``rng.rs``."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def draw_coefficients(seed: int) -> tuple[int, int]:
    """``a`` in ``[1, P)``, then ``b`` in ``[0, P)``: 61-bit draws, rejected outside."""
    # Seeded with the first output of a generator seeded with candidate_seed(seed, "uhlb"):
    # seeded directly, seed s + 1 would replay seed s's draws shifted by one.
    rng = SplitMix64(SplitMix64((seed * SEED_STRIDE + RNG_STREAM) & MASK64).next_u64())

    def draw(low: int) -> int:
        while True:
            v = rng.next_u64() >> 3
            if low <= v < PRIME:
                return v

    a = draw(1)
    b = draw(0)
    return a, b


class UhlbTwin:
    def __init__(self, workers: int, seed: int = 0) -> None:
        self.workers = workers
        self.seed = seed
        self.a, self.b = draw_coefficients(seed)
        self.loads = [0] * workers

    def route(self, key: str | bytes | int) -> int:
        x = h(0, key, self.seed)
        worker = ((self.a * x + self.b) % PRIME) % self.workers
        self.loads[worker] += 1
        return worker


TWINS = {"uhlb": UhlbTwin}
