"""Plain-Python reference twin of ``uhlb``, universal-hash grouping (the baseline UHLB of
Guo and Zhou, Euro-Par 2017 Workshops, Section 5; ``docs/baselines.md``, section
"Universal-hash grouping").

A key ``k`` goes to ``((a * x + b) mod P) mod n`` with ``x = h_0(k)``, ``P = 2**61 - 1``,
and ``a``, ``b`` drawn from SplitMix64 as ``groupers/uhlb.rs`` documents.
"""

from __future__ import annotations

from reference import SplitMix64, h

PRIME = (1 << 61) - 1
RNG_STREAM = int.from_bytes(b"uhlb\0\0\0\0", "little")


def draw_coefficients(seed: int) -> tuple[int, int]:
    """``a`` in ``[1, P)``, then ``b`` in ``[0, P)``: 61-bit draws, rejected outside."""
    rng = SplitMix64.for_grouper(seed, RNG_STREAM)

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
