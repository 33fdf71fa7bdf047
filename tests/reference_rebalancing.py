"""Plain-Python reference twins of ``elb`` and ``clb``, written for reading, not speed.

Guo and Zhou, "Stateful load balancing for parallel stream processing", Euro-Par 2017
Workshops, LNCS 10659 (doi:10.1007/978-3-319-75178-8_7): Section 2 (substreams, Eq. 2),
Section 3 (ELB, Algorithm 1), Section 4 (CLB, Algorithm 2), with the choices documented in
``rust/keysplit-core/src/groupers/rebalancing.rs``:

* the substream of key ``k`` is ``h_0(k) mod p``; ``p = 10 * n`` when ``substreams = 0``;
* the initial table is round robin, ``F(i) = i mod n``;
* a statistics window closes after ``window_tuples`` tuples or on ``end_window()``;
* ``d_i`` (Eq. 2) is the number of tuples of substream ``i`` in the window just closed;
* ELB: ``[v, u] = [l - eps, l + eps]``, ``eps = tolerance * l``, ``l = w / n``; phases
  0 (nothing out of range: no move), 2 (shed from workers over ``u``), 3 (first fit to
  the least-loaded worker under the mean), 4 (repair: from the most loaded donor that can
  give to the least loaded worker);
* CLB: every ``m`` windows, Algorithm 2's greedy split on ``cov >= theta``, then sets to
  workers by the state they already hold there.
"""

from __future__ import annotations

from reference import h

MAX_SUBSTREAMS = 1 << 20


def substream_count(workers: int, substreams: int) -> int:
    return min(10 * workers, MAX_SUBSTREAMS) if substreams == 0 else substreams


def movement(old: list[int], new: list[int], d: list[int]) -> int:
    """``psi = sum_i x_i * d_i`` (Eq. 2), ``x_i = 1`` when substream ``i`` moved."""
    return sum(di for a, b, di in zip(old, new, d, strict=True) if a != b)


def worker_loads(y: list[int], table: list[int], workers: int) -> list[int]:
    loads = [0] * workers
    for yi, w in zip(y, table, strict=True):
        loads[w] += yi
    return loads


def elb_bounds(w: int, workers: int, tolerance: float) -> tuple[float, float, float, float]:
    """``(v, u, eps, mean)`` for a window of ``w`` tuples."""
    mean = w / workers
    eps = tolerance * mean
    return mean - eps, mean + eps, eps, mean


def elb_feasible(y: list[int], workers: int, tolerance: float) -> bool:
    """The paper's assumption ``y_i <= (u - v) / 2`` for every substream, and ``w > 0``."""
    w = sum(y)
    _, _, eps, _ = elb_bounds(w, workers, tolerance)
    return w > 0 and all(yi <= eps for yi in y)


def least_loaded(loads: list[int], candidates: list[int]) -> int | None:
    """Lowest load, then lowest index."""
    return min(candidates, key=lambda j: (loads[j], j), default=None)


def most_loaded(loads: list[int], candidates: list[int]) -> int | None:
    """Highest load, then lowest index."""
    return min(candidates, key=lambda j: (-loads[j], j), default=None)


def elb_rebalance(y: list[int], table: list[int], workers: int, tolerance: float) -> list[int]:
    """Algorithm 1 on window histogram ``y``: the new table."""
    table = list(table)
    n = workers
    w = sum(y)
    if w == 0:
        return table
    v, u, eps, mean = elb_bounds(w, n, tolerance)
    loads = worker_loads(y, table, n)

    def in_range(load: int) -> bool:
        return v <= load <= u

    # Phase 0: every instance within [v, u], nothing to do.
    if all(in_range(load) for load in loads):
        return table
    by_load = sorted(range(len(y)), key=lambda i: (-y[i], i))
    # Phase 1: OI, the instances over u, in descending load (pi = n: R is empty).
    overloaded = sorted((j for j in range(n) if loads[j] > u), key=lambda j: (-loads[j], j))
    # Phase 2: one traversal of each overloaded instance's substreams, largest first.
    pq = []
    for j in overloaded:
        for i in [i for i in by_load if table[i] == j]:
            theta = min(loads[j] - mean, eps)
            if y[i] > 0 and y[i] <= theta:
                pq.append(i)
                loads[j] -= y[i]
    # Phase 3: largest first, to the least-loaded instance of UI that can hold it.
    pq.sort(key=lambda i: (-y[i], i))
    underloaded = {j for j in range(n) if loads[j] < mean}
    for i in pq:
        target = least_loaded(loads, [j for j in sorted(underloaded) if loads[j] + y[i] <= u])
        if target is None:
            target = least_loaded(loads, sorted(underloaded))
        if target is None:
            target = least_loaded(loads, list(range(n)))
        table[i] = target
        loads[target] += y[i]
        if loads[target] > u:
            underloaded.discard(target)
    # Phase 4 (repair): from the most loaded donor that can give, to the least loaded.
    while not all(in_range(load) for load in loads):
        b = least_loaded(loads, list(range(n)))
        donors = [a for a in range(n) if a != b and (loads[a] > u or loads[b] < v)]
        donors.sort(key=lambda a: (-loads[a], a))
        pick = None
        for a in donors:
            for i in by_load:
                if table[i] == a and 0 < y[i] < loads[a] - loads[b] and loads[a] - y[i] >= v and loads[b] + y[i] <= u:
                    pick = (a, i)
                    break
            if pick is not None:
                break
        if pick is None:
            break
        a, i = pick
        table[i] = b
        loads[a] -= y[i]
        loads[b] += y[i]
    return table


def covariance_times_m_squared(history: list[list[int]], i: int, j: int) -> int:
    """``m^2 * cov(X_i, X_j)``, exactly: ``m * sum_t y_it y_jt - sum_t y_it * sum_t y_jt``."""
    m = len(history)
    return m * sum(y[i] * y[j] for y in history) - sum(y[i] for y in history) * sum(y[j] for y in history)


def clb_split(history: list[list[int]], workers: int, theta: float) -> list[list[int]]:
    """Algorithm 2: split the substreams into (at most) ``workers`` sets."""
    p = len(history[0]) if history else 0
    if p == 0:
        return []
    m = len(history)
    bound = theta * m * m

    def correlated(num: int) -> bool:
        return float(num) >= bound

    def omega(i: int, members: list[int]) -> int:
        total = 0
        for j in members:
            if j != i:
                c = covariance_times_m_squared(history, i, j)
                if correlated(c):
                    total += c
        return total

    sets = [list(range(p))]
    set_of = [0] * p
    w = [omega(i, sets[0]) for i in range(p)]
    while len(sets) < workers:
        candidates = [i for i in range(p) if len(sets[set_of[i]]) >= 2]
        if not candidates:
            break
        k = min(candidates, key=lambda i: (-w[i], i))
        h_ = set_of[k]
        moved = [i for i in sets[h_] if i != k and correlated(covariance_times_m_squared(history, k, i))]
        kept = [i for i in sets[h_] if i not in moved]
        if not moved:
            moved = [k]
            kept = [i for i in sets[h_] if i != k]
        r = len(sets)
        for i in moved:
            set_of[i] = r
        sets[h_] = kept
        sets.append(moved)
        for s in (h_, r):
            for i in sets[s]:
                w[i] = omega(i, sets[s])
    return sets


def clb_assign(sets: list[list[int]], table: list[int], d: list[int], workers: int) -> list[int]:
    """Sets to workers, keeping the most state in place first."""
    overlap: dict[tuple[int, int], int] = {}
    for s, members in enumerate(sets):
        for i in members:
            if d[i] > 0:
                overlap[(s, table[i])] = overlap.get((s, table[i]), 0) + d[i]
    pairs = sorted(overlap.items(), key=lambda item: (-item[1], item[0]))
    worker_of_set: dict[int, int] = {}
    taken: set[int] = set()
    for (s, w), _ in pairs:
        if s not in worker_of_set and w not in taken:
            worker_of_set[s] = w
            taken.add(w)
    free = iter([w for w in range(workers) if w not in taken])
    new = list(table)
    for s, members in enumerate(sets):
        w = worker_of_set[s] if s in worker_of_set else next(free, 0)
        for i in members:
            new[i] = w
    return new


class _SubstreamTwin:
    def __init__(self, workers: int, seed: int, substreams: int, window_tuples: int) -> None:
        self.workers = workers
        self.seed = seed
        self.p = substream_count(workers, substreams)
        self.window_tuples = window_tuples
        self.table = [i % workers for i in range(self.p)]
        self.window = [0] * self.p
        self.window_count = 0
        self.last_window = [0] * self.p
        self.last_movement = 0
        self.total_movement = 0
        self.rebalances = 0
        self.loads = [0] * workers

    def substream_of(self, key: str | bytes | int) -> int:
        return h(0, key, self.seed) % self.p

    def route(self, key: str | bytes | int) -> int:
        s = self.substream_of(key)
        worker = self.table[s]
        self.window[s] += 1
        self.window_count += 1
        self.loads[worker] += 1
        if self.window_count >= self.window_tuples:
            self.end_window()
        return worker

    def close_window(self) -> None:
        self.last_window = self.window
        self.window = [0] * self.p
        self.window_count = 0

    def install(self, new_table: list[int]) -> None:
        psi = movement(self.table, new_table, self.last_window)
        self.table = new_table
        self.last_movement = psi
        self.total_movement += psi
        self.rebalances += 1


class ElbTwin(_SubstreamTwin):
    def __init__(
        self,
        workers: int,
        seed: int = 0,
        substreams: int = 0,
        window_tuples: int = 600_000,
        tolerance: float = 0.1,
    ) -> None:
        super().__init__(workers, seed, substreams, window_tuples)
        self.tolerance = tolerance

    def end_window(self) -> None:
        self.close_window()
        self.install(elb_rebalance(self.last_window, self.table, self.workers, self.tolerance))


class ClbTwin(_SubstreamTwin):
    def __init__(
        self,
        workers: int,
        seed: int = 0,
        substreams: int = 0,
        window_tuples: int = 600_000,
        period_windows: int = 24,
        covariance_threshold: float = 0.0,
    ) -> None:
        super().__init__(workers, seed, substreams, window_tuples)
        self.period = period_windows
        self.theta = covariance_threshold
        self.history: list[list[int]] = []

    def end_window(self) -> None:
        self.close_window()
        self.history.append(list(self.last_window))
        if len(self.history) >= self.period:
            sets = clb_split(self.history, self.workers, self.theta)
            self.install(clb_assign(sets, self.table, self.last_window, self.workers))
            self.history = []


TWINS = {"elb": ElbTwin, "clb": ClbTwin}
