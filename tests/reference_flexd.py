"""Plain-Python reference twin of FlexD, written for reading, not speed.

Liu, Wang, Zhou and Mao, "Adaptive key partitioning in distributed stream processing",
CCF Transactions on High Performance Computing, 2024 (doi:10.1007/s42514-023-00179-3):
the micro-batch operator and scheduler of Section 4.2, the per-segment Space-Saving sketch
of Section 4.3 and Algorithm 1 as Section 4.4 describes it, with the choices documented in
``rust/keysplit-core/src/groupers/flexd.rs``:

* the routing table built by the scheduler from micro-batch ``b`` routes micro-batch
  ``b + 1`` (a key hot in the current segment goes to its least-loaded instance, any other
  key to ``h_0(k) mod n``);
* the scheduler replays Algorithm 1 over the ``m`` collected keys on a scratch copy of the
  loads, adding each of its assignments to the scratch;
* a key is hot when its segment count reaches ``f * l``; a new hot key gets the
  least-loaded worker and the threshold ``f * delta``; a crossing (count reaches
  ``T_f[k] * l``) multiplies the threshold by ``delta`` and adds the least-loaded unused
  worker;
* a segment closes after ``l`` keys (or at ``end_window``), clearing the sketch; every
  ``cleanup_segments`` segments only the ``retain`` most recently accessed entries stay.
"""

from __future__ import annotations

from math import ceil

from reference import SpaceSavingTwin, fingerprint, h


class FlexDTwin:
    def __init__(
        self,
        workers: int,
        seed: int = 0,
        delta: float = 1.5,
        threshold: float = 0.0,
        counters: int = 0,
        segment_tuples: int = 100_000,
        batch_tuples: int = 1_000,
        cleanup_segments: int = 10,
        retain: int = 50_000,
    ) -> None:
        self.workers = workers
        self.seed = seed
        self.delta = float(delta)
        if threshold == 0:
            self.f = 1.0 / (2 * workers)  # DKG's theta = 1/(2n)
            capacity = 4 * workers  # ceil(1/epsilon), epsilon = theta / 2
        else:
            self.f = float(threshold)
            capacity = ceil(2 / self.f)
        if counters:
            capacity = counters
        self.l = segment_tuples
        self.m = batch_tuples
        self.cleanup_segments = cleanup_segments
        self.retain = retain
        self.hot_count = self.f * self.l
        self.sketch = SpaceSavingTwin(capacity)
        self.segment_fill = 0
        self.segment = 0
        self.clock = 0
        # T_f and T_i, one dict per hot key: threshold, crossings, instances,
        # hot_segment (last segment it was hot in), last_access (scheduler clock).
        self.entries: dict[int, dict] = {}
        self.batch: list[tuple[int, int]] = []  # (fingerprint, hash worker)
        self.loads = [0] * workers

    # -- the operator ----------------------------------------------------------------

    def route(self, key: object) -> int:
        k = fingerprint(key)
        hash_worker = h(0, key, self.seed) % self.workers
        entry = self.entries.get(k)
        if entry is not None and entry["hot_segment"] == self.segment:
            # ASSIGN by the previous table: the least-loaded instance, earliest on ties.
            worker = self.least_loaded(entry["instances"], self.loads)
        else:
            worker = hash_worker
        self.loads[worker] += 1
        # COLLECT; RUN once m keys are in.
        self.batch.append((k, hash_worker))
        if len(self.batch) == self.m:
            self.run_scheduler()
        return worker

    def end_window(self) -> None:
        self.run_scheduler()
        self.close_segment()

    # -- the scheduler ---------------------------------------------------------------

    @staticmethod
    def least_loaded(candidates: list[int], loads: list[int]) -> int:
        best = candidates[0]
        for worker in candidates[1:]:
            if loads[worker] < loads[best]:
                best = worker
        return best

    def least_loaded_unused(self, used: list[int], loads: list[int]) -> int | None:
        unused = [w for w in range(self.workers) if w not in used]
        return self.least_loaded(unused, loads) if unused else None

    def run_scheduler(self) -> None:
        scratch = list(self.loads)
        for k, hash_worker in self.batch:
            worker = self.algorithm_1(k, hash_worker, scratch)
            scratch[worker] += 1
        self.batch = []

    def algorithm_1(self, k: int, hash_worker: int, loads: list[int]) -> int:
        # Line 1: the sketch gives f_t, the key's count in the segment.
        self.sketch.insert(k)
        self.segment_fill += 1
        self.clock += 1
        f_t = self.sketch.estimate(k)[0]
        entry = self.entries.get(k)
        if f_t < self.hot_count:
            # Lines 10-11: low frequency, hashed.
            if entry is not None:
                entry["last_access"] = self.clock
            worker = hash_worker
        elif entry is None:
            # Lines 13-16: hot for the first time.
            worker = self.least_loaded(list(range(self.workers)), loads)
            self.entries[k] = {
                "threshold": self.f * self.delta,
                "crossings": 0,
                "instances": [worker],
                "hot_segment": self.segment,
                "last_access": self.clock,
            }
        else:
            entry["hot_segment"] = self.segment
            entry["last_access"] = self.clock
            worker = None
            if f_t >= entry["threshold"] * self.l:
                # Lines 18-20: crossed again; threshold times delta, one more instance.
                entry["crossings"] += 1
                entry["threshold"] *= self.delta
                worker = self.least_loaded_unused(entry["instances"], loads)
                if worker is not None:
                    entry["instances"].append(worker)
            if worker is None:
                # Line 22: the least-loaded instance.
                worker = self.least_loaded(entry["instances"], loads)
        if self.segment_fill == self.l:
            self.close_segment()
        return worker

    def close_segment(self) -> None:
        self.sketch.clear()
        self.segment_fill = 0
        self.segment += 1
        if self.segment % self.cleanup_segments == 0:
            # Keep the `retain` most recently accessed entries.
            newest = sorted(self.entries.items(), key=lambda item: -item[1]["last_access"])
            self.entries = dict(newest[: self.retain])

    # -- for the tests ---------------------------------------------------------------

    def entry(self, key: object) -> dict | None:
        return self.entries.get(fingerprint(key))

    def is_hot(self, key: object) -> bool:
        entry = self.entry(key)
        return entry is not None and entry["hot_segment"] == self.segment


TWINS = {"flexd": FlexDTwin}
