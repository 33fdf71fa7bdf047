"""Plain-Python reference twins of ``d_choices``, ``w_choices`` and ``rr_head``: Nasir et
al., "When two choices are not enough: Balancing at scale in distributed stream
processing", ICDE 2016, as ``docs/baselines.md`` specifies them and ``groupers/choices.rs``
documents its choices.

Every tuple is first counted into a Space-Saving summary of fingerprints; the key is in the
head when its count exceeds ``theta * m``. Tail keys go as PKG. Written for reading: the
head of D-Choices is recomputed by a full scan at every tuple and compared as a set.
"""

from __future__ import annotations

import math

from reference import SpaceSavingTwin, fingerprint, h


def default_theta(workers: int) -> float:
    return 1.0 / (5.0 * workers)


def default_capacity(theta: float) -> int:
    return math.ceil(4.0 / theta)


def pow_int(base: float, exp: int) -> float:
    """``base ** exp`` by binary exponentiation, the same products as the Rust core."""
    result = 1.0
    while exp > 0:
        if exp & 1:
            result *= base
        base *= base
        exp >>= 1
    return result


def round_half_away(x: float) -> int:
    """Rust's ``f64::round`` for ``x >= 0`` (Python's ``round`` rounds halves to even)."""
    whole = math.floor(x)
    return whole + 1 if x - whole >= 0.5 else whole


def choose_d(n: int, head_size: int, p_head: float, p_top: float, epsilon: float) -> int:
    """The smallest d from max(2, round(p_1 n)) up to n satisfying both inequalities."""
    q = (n - 1.0) / n
    p_tail = 1.0 - p_head
    start = max(2, round_half_away(p_top * n))
    for d in range(start, n + 1):
        b_head = 1.0 - pow_int(q, head_size * d)
        head_ok = p_head + p_tail * b_head * b_head <= b_head + epsilon
        b_top = 1.0 - pow_int(q, d)
        top_lhs = p_top + (p_head - p_top) * pow_int(b_top, d) + p_tail * b_top * b_top
        top_ok = top_lhs <= b_top + epsilon
        if head_ok and top_ok:
            return d
    return n


class _HeadTailTwin:
    """What the three groupers share: the summary, the head test and PKG for the tail."""

    def __init__(
        self,
        workers: int,
        seed: int = 0,
        theta: float = 0.0,
        capacity: int = 0,
        distinct_candidates: bool = True,
    ) -> None:
        self.workers = workers
        self.seed = seed
        self.theta = theta if theta != 0.0 else default_theta(workers)
        self.capacity = capacity if capacity != 0 else default_capacity(self.theta)
        self.distinct_candidates = distinct_candidates
        self.summary = SpaceSavingTwin(self.capacity)
        self.loads = [0] * workers

    def pkg_candidates(self, key: object) -> tuple[int, int]:
        c1 = h(1, key, self.seed) % self.workers
        c2 = h(2, key, self.seed) % self.workers
        if self.distinct_candidates and c2 == c1:
            c2 = (c2 + 1) % self.workers
        return c1, c2

    def least_loaded(self) -> int:
        """The least-loaded worker, the lowest index on ties."""
        return min(range(self.workers), key=lambda w: (self.loads[w], w))

    def in_head(self, count: int) -> bool:
        return float(count) > self.theta * float(self.summary.total)

    def current_head(self) -> list[tuple[int, int, int]]:
        """Every counter ``(item, count, error)`` whose count exceeds theta * m."""
        return [c for c in self.summary.by_count() if self.in_head(c[1])]

    def route(self, key: object) -> int:
        item = fingerprint(key)
        # Count first, then test the head with the counts after this tuple.
        self.summary.insert(item)
        count, _error = self.summary.estimate(item)
        self.before_routing()
        if self.in_head(count):
            worker = self.route_head(key)
        else:
            c1, c2 = self.pkg_candidates(key)
            worker = c2 if self.loads[c2] < self.loads[c1] else c1
        self.loads[worker] += 1
        return worker

    def before_routing(self) -> None:
        pass

    def route_head(self, key: object) -> int:
        raise NotImplementedError


class DChoicesTwin(_HeadTailTwin):
    def __init__(self, workers: int, seed: int = 0, epsilon: float = 1e-4, **params: object) -> None:
        super().__init__(workers, seed, **params)
        self.epsilon = epsilon
        self.head: set[int] = set()
        self.d = choose_d(workers, 0, 0.0, 0.0, epsilon)

    def before_routing(self) -> None:
        # The head set after counting this tuple; d changes only when its membership does.
        head = self.current_head()
        members = {item for item, _, _ in head}
        if members != self.head:
            self.head = members
            m = self.summary.total
            p_head = sum(count for _, count, _ in head) / m
            p_top = max(count for _, count, _ in head) / m if head else 0.0
            self.d = choose_d(self.workers, len(head), p_head, p_top, self.epsilon)

    def head_candidates(self, key: object) -> list[int]:
        """h_1..h_d mod n, the second moved off the first like PKG's; repeats kept."""
        c1, c2 = self.pkg_candidates(key)
        return [c1, c2] + [h(i, key, self.seed) % self.workers for i in range(3, self.d + 1)]

    def route_head(self, key: object) -> int:
        if self.d >= self.workers:
            return self.least_loaded()
        best = None
        for candidate in self.head_candidates(key):
            if best is None or self.loads[candidate] < self.loads[best]:
                best = candidate
        return best


class WChoicesTwin(_HeadTailTwin):
    def route_head(self, key: object) -> int:
        return self.least_loaded()


class RoundRobinHeadTwin(_HeadTailTwin):
    def __init__(self, workers: int, seed: int = 0, **params: object) -> None:
        super().__init__(workers, seed, **params)
        self.next_head_worker = 0

    def route_head(self, key: object) -> int:
        worker = self.next_head_worker
        self.next_head_worker = (worker + 1) % self.workers
        return worker


TWINS = {"d_choices": DChoicesTwin, "w_choices": WChoicesTwin, "rr_head": RoundRobinHeadTwin}
