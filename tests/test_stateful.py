"""A stateful model test: every grouper against its reference twin, under any interleaving
of single keys, batches, window ends, snapshot/restore (also through pickle) and changes
of source (each source routes with its own grouper state, as in the papers' multi-spout
experiments)."""

from __future__ import annotations

import pickle

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import keysplit
from reference import all_twins
from strategies import GROUPER_NAMES, seeds
from test_snapshot import BUSY_PARAMS

TWINS = all_twins()
STR_KEYS = st.sampled_from(["", "a", "b", "hot", "hot", "hot", "café", "x" * 20])
INT_KEYS = st.sampled_from([7, 7, 7, 0, -1, 2**63 - 1])
KEYS = st.one_of(STR_KEYS, INT_KEYS)
MAX_SOURCES = 3


class GrouperAgainstTwin(RuleBasedStateMachine):
    @initialize(name=st.sampled_from(GROUPER_NAMES), workers=st.integers(1, 9), seed=seeds)
    def start(self, name: str, workers: int, seed: int) -> None:
        self.name, self.workers, self.seed = name, workers, seed
        self.params = BUSY_PARAMS.get(name, {})
        self.groupers: list[keysplit.Grouper] = []
        self.twins: list[object] = []
        self.routed: list[int] = []
        self.source = 0
        self.add_source()

    def add_source(self) -> None:
        self.groupers.append(keysplit.Grouper(self.name, self.workers, self.seed, **self.params))
        self.twins.append(TWINS[self.name](self.workers, self.seed, **self.params))
        self.routed.append(0)

    def check(self, routed: list[int], keys: list[object]) -> None:
        twin = self.twins[self.source]
        expected = [twin.route(k) for k in keys]  # type: ignore[attr-defined]
        assert routed == expected, (self.name, keys)
        assert all(0 <= w < self.workers for w in routed)
        self.routed[self.source] += len(keys)

    @rule(key=KEYS)
    def route_one(self, key: object) -> None:
        self.check([self.groupers[self.source].route_key(key)], [key])

    @rule(keys=st.one_of(st.lists(STR_KEYS, min_size=1, max_size=60), st.lists(INT_KEYS, min_size=1, max_size=60)))
    def route_batch(self, keys: list[object]) -> None:
        self.check(self.groupers[self.source].route(keys).to_list(), keys)

    @rule()
    def end_window(self) -> None:
        self.groupers[self.source].end_window()
        getattr(self.twins[self.source], "end_window", lambda: None)()

    @rule(through_pickle=st.booleans())
    def snapshot_and_restore(self, through_pickle: bool) -> None:
        grouper = self.groupers[self.source]
        self.groupers[self.source] = (
            pickle.loads(pickle.dumps(grouper)) if through_pickle else keysplit.Grouper.restore(grouper.snapshot())
        )

    @rule(source=st.integers(0, MAX_SOURCES - 1))
    def change_source(self, source: int) -> None:
        while len(self.groupers) <= source:
            self.add_source()
        self.source = source

    @invariant()
    @precondition(lambda self: hasattr(self, "groupers"))
    def loads_match_the_twin_and_count_every_tuple(self) -> None:
        for grouper, twin, routed in zip(self.groupers, self.twins, self.routed, strict=True):
            assert sum(grouper.loads) == routed
            if hasattr(twin, "loads"):
                assert grouper.loads == list(twin.loads)


GrouperAgainstTwin.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestGrouperAgainstTwin = GrouperAgainstTwin.TestCase
