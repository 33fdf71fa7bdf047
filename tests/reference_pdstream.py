"""Plain-Python reference twin of Pd-Stream, written for reading, not speed.

Sun, Wu, Wen, Gao and Buyya, "A popularity-aware discriminative grouping strategy in
distributed stream computing systems": Algorithm 1 (hot key probability search) and
Algorithm 2 (instance assignment), with the choices documented in
``rust/keysplit-core/src/groupers/pdstream.rs``:

* the window holds the last ``N = ceil(alpha * n / 2)`` keys and ``n_k`` counts the
  incoming tuple (the window slides before the count is read);
* ``n_k == 1`` is a non-hot key, routed as PKG; ``n_k >= 2`` a hot key with an entry;
* Algorithm 1 returns the midpoint of its final bracket, which reproduces Table III;
* an entry is dropped when the last occurrence of its key leaves the window.

The probability table is computed here independently of the Rust core: the binomial tail
``P(X >= n_k)`` at each bisection midpoint (a dyadic fraction, exact as a float) is an
exact rational, ``sum C(N, i) a^i b^(N-i) / d^N`` with ``p = a/d``, built with
``math.comb`` and compared exactly with the target.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from functools import cache
from math import comb

from reference import fingerprint, h


def window_length(alpha: int, workers: int) -> int:
    """``N = alpha * n / 2`` (Section V-B), rounded up when ``alpha * n`` is odd."""
    return (alpha * workers + 1) // 2


def tail_is_below(trials: int, at_least: int, p: float, target: float) -> bool:
    """Whether ``P(X >= at_least) < target`` for ``X ~ Binomial(trials, p)``, exactly
    (Eq. 14 and 15)."""
    p_exact = Fraction(p)
    a, d = p_exact.numerator, p_exact.denominator
    b = d - a
    tail_times_d_pow_n = sum(comb(trials, i) * a**i * b ** (trials - i) for i in range(at_least, trials + 1))
    t = Fraction(target)
    return tail_times_d_pow_n * t.denominator < t.numerator * d**trials


@cache
def estimate_probability(trials: int, occurrences: int, expected: float, epsilon: float) -> float:
    """Algorithm 1: bisect ``[0, 1]`` until the bracket is at most ``epsilon`` wide."""
    p_lower, p_upper = 0.0, 1.0
    while p_upper - p_lower > epsilon:
        p_mid = (p_upper + p_lower) / 2
        if tail_is_below(trials, occurrences, p_mid, expected):
            p_lower = p_mid
        else:
            p_upper = p_mid
    # The midpoint of the final bracket (the literal last p_mid misses Table III's 43.1%).
    return (p_lower + p_upper) / 2


def probability_table(trials: int, expected: float = 0.99, epsilon: float = 1e-4) -> list[float]:
    """``p_hat`` for ``n_k = 1 .. trials``: ``probability_table(16)`` is Table III."""
    return [estimate_probability(trials, n_k, expected, epsilon) for n_k in range(1, trials + 1)]


class PdStreamTwin:
    def __init__(
        self,
        workers: int,
        seed: int = 0,
        alpha: int = 4,
        expected_probability: float = 0.99,
        epsilon: float = 1e-4,
        distinct_candidates: bool = True,
    ) -> None:
        self.workers = workers
        self.seed = seed
        self.expected_probability = expected_probability
        self.epsilon = epsilon
        self.distinct_candidates = distinct_candidates
        self.window_length = window_length(alpha, workers)
        self.window: deque[int] = deque()  # fingerprints, oldest first
        self.routes: dict[int, list[int]] = {}  # hot key -> candidate set, in joining order
        self.loads = [0] * workers

    def hash_candidates(self, key: object) -> tuple[int, int]:
        c1 = h(1, key, self.seed) % self.workers
        c2 = h(2, key, self.seed) % self.workers
        if self.distinct_candidates and c2 == c1:
            c2 = (c2 + 1) % self.workers
        return c1, c2

    def estimated_candidates(self, n_k: int) -> int:
        """Eq. 16: ``floor(p_hat * n)``, capped at ``n``."""
        p_hat = estimate_probability(self.window_length, n_k, self.expected_probability, self.epsilon)
        return min(int(p_hat * self.workers), self.workers)

    def least_loaded(self, candidates: list[int]) -> int:
        """The first candidate with the smallest load."""
        best = candidates[0]
        for worker in candidates[1:]:
            if self.loads[worker] < self.loads[best]:
                best = worker
        return best

    def occurrences(self, key: object) -> int:
        return self.window.count(fingerprint(key))

    def candidate_set(self, key: object) -> list[int] | None:
        entry = self.routes.get(fingerprint(key))
        return None if entry is None else list(entry)

    def route(self, key: object) -> int:
        k = fingerprint(key)
        # Steps 18-22 (first: the tuple passes through the window before it is routed).
        self.window.append(k)
        if len(self.window) > self.window_length:
            tail = self.window.popleft()
            if tail not in self.window and tail in self.routes:
                del self.routes[tail]
        # Step 1: n_k, the occurrences of k among the last N keys, this one included.
        n_k = self.window.count(k)
        c1, c2 = self.hash_candidates(key)
        if n_k == 1:
            # Steps 2-3: a non-hot key goes by its two hashes.
            candidates = [c1, c2]
        else:
            # Steps 6-10: the routing entry, created from the two hashes.
            if k not in self.routes:
                self.routes[k] = [c1] if c1 == c2 else [c1, c2]
            candidates = self.routes[k]
            # Steps 11-15: grow by the least-loaded worker of all while n_hat > |C|.
            if self.estimated_candidates(n_k) > len(candidates):
                lowest = self.least_loaded(list(range(self.workers)))
                if lowest not in candidates:
                    candidates.append(lowest)
        # Step 17: the least-loaded candidate.
        worker = self.least_loaded(candidates)
        self.loads[worker] += 1
        return worker

    def end_window(self) -> None:
        """The sliding window is counted in tuples: nothing to close."""


TWINS = {"pdstream": PdStreamTwin}
