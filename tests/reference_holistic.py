"""Plain-Python reference twins of CM, AM, cAM and LM, written for reading, not speed.

Katsipoulakis, Labrinidis and Chrysanthis, "A Holistic View of Stream Partitioning
Costs", PVLDB 2017: Algorithm 1 (window reset, M hash candidates) and the ``decide()`` of
Algorithms 2 (CM), 3 (AM), 4 (cAM) and 5 (LM, with the normalisations of Eq. 7-9), over
either exact sets of key fingerprints (Section 3.2.1) or HyperLogLogs of 2^12 registers
of 5 bits with the paper's "already sent" probe (Section 3.2.2). The choices are
documented in ``rust/keysplit-core/src/groupers/holistic.rs``:

* candidates ``c_i = h_i(k) mod n`` for ``i = 1..M``; ``c_2`` moves to ``(c_2 + 1) mod n``
  when it equals ``c_1`` unless ``distinct_candidates`` is false (PKG's rule);
* "least" walks the candidates in order with a strict comparison: ties to the first;
* ``C`` and ``L`` are per window: ``window_tuples`` tuples (0: never by count) or
  ``end_window()``; ``loads`` counts from the start of the stream;
* AM and cAM route a key some candidate already holds there without updating ``C``;
* LM scores ``p * L' + (1 - p) * CL'``, min-max normalised over all workers, 0/0 as 0.

The HyperLogLog twin reproduces ``sketches/hyperloglog.rs`` register for register: the
register hash is XXH3-64 of the fingerprint's 8 little-endian bytes seeded with the bytes
of "hyperlog"; the top 12 bits pick the register, and the rank is one plus the leading
zeros of the remaining 52 bits, capped at 31.
"""

from __future__ import annotations

import math

import xxhash

from reference import MASK64, fingerprint, h

HLL_SEED = int.from_bytes(b"hyperlog", "little")
HLL_PRECISION = 12
MAX_RANK = 31


class HyperLogLogTwin:
    """Flajolet et al.'s HyperLogLog, raw estimate with linear counting, as the Rust core.

    ``Z = sum_j 2^-M[j]`` is kept exactly, as the integer ``sum_j 2^(31 - M[j])``, and the
    number of empty registers alongside, so that an estimate costs O(1).
    """

    def __init__(self, precision: int = HLL_PRECISION) -> None:
        self.precision = precision
        self.m = 1 << precision
        self.registers = [0] * self.m
        self.empty = self.m
        self.scaled_inverse_sum = self.m << MAX_RANK

    def position(self, item: int) -> tuple[int, int]:
        """The register index (top ``precision`` bits) and rank of ``item``."""
        hashed = xxhash.xxh3_64_intdigest(item.to_bytes(8, "little"), seed=HLL_SEED)
        index = hashed >> (64 - self.precision)
        rest = (hashed << self.precision) & MASK64
        leading_zeros = 64 - rest.bit_length()
        return index, min(leading_zeros + 1, MAX_RANK)

    def raised(self, index: int, rank: int) -> tuple[int, int]:
        """``(empty, scaled_inverse_sum)`` once register ``index`` is raised to ``rank``."""
        old = self.registers[index]
        empty = self.empty - (1 if old == 0 else 0)
        scaled = self.scaled_inverse_sum - (1 << (MAX_RANK - old)) + (1 << (MAX_RANK - rank))
        return empty, scaled

    def insert(self, item: int) -> None:
        index, rank = self.position(item)
        if rank > self.registers[index]:
            self.empty, self.scaled_inverse_sum = self.raised(index, rank)
            self.registers[index] = rank

    def estimate(self) -> float:
        return self.estimate_from(self.empty, self.scaled_inverse_sum)

    def estimate_from(self, empty: int, scaled_inverse_sum: int) -> float:
        m = float(self.m)
        alpha = {16: 0.673, 32: 0.697, 64: 0.709}.get(self.m, 0.7213 / (1.0 + 1.079 / m))
        inverse_sum = scaled_inverse_sum / (1 << MAX_RANK)  # exact: below 2^53, / 2^31
        raw = alpha * m * m / inverse_sum
        if raw <= 2.5 * m and empty > 0:
            return m * math.log(m / empty)  # linear counting
        return raw

    def already_sent(self, item: int) -> bool:
        """Section 3.2.2: estimate, update a trial copy, estimate again; equal estimates
        mean the key was (optimistically) already sent."""
        index, rank = self.position(item)
        if rank <= self.registers[index]:
            return True  # the trial update changes no register
        return self.estimate_from(*self.raised(index, rank)) == self.estimate()


class ExactSet:
    """Section 3.2.1: the exact set of fingerprints sent to a worker."""

    def __init__(self) -> None:
        self.items: set[int] = set()

    def insert(self, item: int) -> None:
        self.items.add(item)

    def estimate(self) -> float:
        return float(len(self.items))

    def already_sent(self, item: int) -> bool:
        return item in self.items


class HolisticTwin:
    """Algorithm 1; subclasses give ``decide()``."""

    def __init__(
        self,
        workers: int,
        seed: int = 0,
        choices: int = 2,
        window_tuples: int = 0,
        distinct_candidates: bool = True,
        hll: bool = False,
    ) -> None:
        self.workers = workers
        self.seed = seed
        self.choices = choices
        self.window_tuples = window_tuples
        self.distinct_candidates = distinct_candidates
        self.hll = hll
        self.loads = [0] * workers  # from the start of the stream
        self.end_window()

    def end_window(self) -> None:
        """Reset(C) and Reset(L) of Algorithm 1."""
        self.C = [HyperLogLogTwin() if self.hll else ExactSet() for _ in range(self.workers)]
        self.L = [0] * self.workers
        self.routed_in_window = 0

    def candidates(self, key: str | bytes | int) -> list[int]:
        out = []
        for i in range(1, self.choices + 1):
            c = h(i, key, self.seed) % self.workers
            if i == 2 and self.distinct_candidates and c == out[0]:
                c = (c + 1) % self.workers
            out.append(c)
        return out

    @staticmethod
    def least(candidates: list[int], score) -> int:
        best = candidates[0]
        for c in candidates[1:]:
            if score(c) < score(best):
                best = c
        return best

    def send(self, worker: int, item: int | None) -> int:
        """``C[worker].update(k)`` (unless ``item`` is None) and ``L[worker] += 1``."""
        if item is not None:
            self.C[worker].insert(item)
        self.L[worker] += 1
        return worker

    def route(self, key: str | bytes | int) -> int:
        k = fingerprint(key)
        worker = self.decide(k, self.candidates(key))
        self.loads[worker] += 1
        self.routed_in_window += 1
        if self.window_tuples > 0 and self.routed_in_window >= self.window_tuples:
            self.end_window()
        return worker

    def decide(self, k: int, candidates: list[int]) -> int:
        raise NotImplementedError


class CmTwin(HolisticTwin):
    """Algorithm 2: the candidate with the least cardinality."""

    def decide(self, k: int, candidates: list[int]) -> int:
        worker = self.least(candidates, lambda c: self.C[c].estimate())
        return self.send(worker, k)


class AmTwin(HolisticTwin):
    """Algorithm 3: a candidate that already has k, else the least cardinality."""

    def decide(self, k: int, candidates: list[int]) -> int:
        for c in candidates:
            if self.C[c].already_sent(k):
                return self.send(c, None)
        worker = self.least(candidates, lambda c: self.C[c].estimate())
        return self.send(worker, k)


class CamTwin(HolisticTwin):
    """Algorithm 4: a candidate that already has k, else the least window tuple count."""

    def decide(self, k: int, candidates: list[int]) -> int:
        for c in candidates:
            if self.C[c].already_sent(k):
                return self.send(c, None)
        worker = self.least(candidates, lambda c: self.L[c])
        return self.send(worker, k)


class LmTwin(HolisticTwin):
    """Algorithm 5 with Eq. 7-9: the least hybrid load of normalised loads."""

    def __init__(self, workers: int, seed: int = 0, p: float = 0.5, **params) -> None:
        self.p = p
        super().__init__(workers, seed, **params)

    def decide(self, k: int, candidates: list[int]) -> int:
        cards = [self.C[j].estimate() for j in range(self.workers)]
        l_min, l_max = min(self.L), max(self.L)
        c_min, c_max = min(cards), max(cards)

        def hybrid(c: int) -> float:
            l_norm = (self.L[c] - l_min) / (l_max - l_min) if l_max > l_min else 0.0  # Eq. 7
            c_norm = (cards[c] - c_min) / (c_max - c_min) if c_max > c_min else 0.0  # Eq. 8
            return self.p * l_norm + (1.0 - self.p) * c_norm  # Eq. 9

        worker = self.least(candidates, hybrid)
        return self.send(worker, k)


def _hll(cls):
    return lambda workers, seed=0, **params: cls(workers, seed, hll=True, **params)


TWINS = {
    "cm": CmTwin,
    "am": AmTwin,
    "cam": CamTwin,
    "lm": LmTwin,
    "cm_hll": _hll(CmTwin),
    "am_hll": _hll(AmTwin),
    "cam_hll": _hll(CamTwin),
    "lm_hll": _hll(LmTwin),
}
