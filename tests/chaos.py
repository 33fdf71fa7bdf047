"""Killing one executor of a standalone cluster while a Spark plan runs, at a chosen stage.

The stages come from Spark's REST status API; the executors are the
``CoarseGrainedExecutorBackend`` JVMs of the cluster's process group. A kill is ``SIGKILL``
(a lost node, not a shutdown): the executor's shuffle files and cached blocks are gone,
and the standalone master starts a new executor in its place.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_status import StatusApi


def executor_pids(pgid: int) -> list[int]:
    """The live executor JVMs of the cluster whose process group is ``pgid``."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes()
            stat = (cmdline.parent / "stat").read_text()
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" not in command:
            continue
        state, _ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            pids.append(int(cmdline.parent.name))
    return sorted(pids)


@dataclass(frozen=True)
class Kill:
    """Where a kill landed: the ``ordinal``-th stage the action started (from 0), with the
    tasks of it that had finished, and the executor's pid."""

    ordinal: int
    stage: int
    completed_tasks: int
    pid: int


def stages_of(api: StatusApi, action: Callable[[], Any], *, twice: bool = True) -> tuple[Any, list[dict[str, Any]]]:
    """``action``'s result and the stages it ran (first attempts, by stage id), for picking
    the stage to kill in. With ``twice`` the action runs twice and the second run's stages
    are listed: a first run may add stages of its own, which later runs skip (the online
    plan of apply_grouped does even with its input's schema given: 7 stages, then 6); a plan
    Spark runs alike every time (no Python state of its own) needs one run."""
    if twice:
        action()
    before = api.last_stage()
    result = action()
    ran = sorted((s for s in api.stages_after(before) if s["attemptId"] == 0), key=lambda s: s["stageId"])
    # Spark numbers an application's stages in the order it makes them, one id after another:
    # the ordinal-th stage an action starts is then found by its id (:func:`run_killing_at`).
    ids = [s["stageId"] for s in ran]
    assert ids == list(range(before + 1, before + 1 + len(ids))), f"stage ids not consecutive: {ids}"
    return result, ran


@dataclass(frozen=True)
class At:
    """When a kill is due: once the ``ordinal``-th stage the action started (from 0), or the
    first it started that ``stage`` picks from its REST figures and its place among them, is
    running with at least ``completed`` finished tasks; or (``once_cached``) once a DataFrame it
    persists is wholly cached."""

    ordinal: int | None = None
    stage: Callable[[dict[str, Any], int], bool] | None = None
    completed: int = 0
    once_cached: bool = False


def run_killing(
    api: StatusApi,
    pgid: int,
    action: Callable[[], Any],
    *,
    ordinal: int | None = None,
    stage: Callable[[dict[str, Any], int], bool] | None = None,
    completed: int = 1,
    once_cached: bool = False,
    victim: Callable[[], int] | None = None,
    executors: int = 2,
    timeout: float = 300.0,
    attempts: int = 3,
) -> tuple[Any, Kill]:
    """Run ``action``, killing one executor (or the process ``victim`` names) when
    ``At(ordinal, stage, completed, once_cached)`` is due; then wait until the cluster has
    ``executors`` executors again. The result returned is that of the run the kill landed in
    (:func:`run_killing_at`)."""
    point = At(ordinal, stage, completed, once_cached)
    [(result, [kill])] = run_killing_at(
        api, pgid, action, [point], victim=victim, executors=executors, timeout=timeout, attempts=attempts
    )
    return result, kill


def run_killing_at(
    api: StatusApi,
    pgid: int,
    action: Callable[[], Any],
    points: Sequence[At],
    *,
    victim: Callable[[], int] | None = None,
    executors: int = 2,
    timeout: float = 300.0,
    attempts: int = 3,
) -> list[tuple[Any, list[Kill]]]:
    """Run ``action``, killing one executor at each of ``points`` in turn, within one run where
    they fit: the next kill is due once its point is and the cluster is back to ``executors``
    executors (one executor lost at a time, as a single failure would lose it). The status API
    is polled: a stage of a few short tasks can end between two polls (the more likely, the
    busier the machine), or before the killed executor's successor starts; then the action runs
    again for the points left, up to ``attempts`` runs in all. Returns each run's result with
    the kills that landed in it; every point's kill lands in exactly one of them."""
    deadline = time.monotonic() + timeout
    left = list(points)
    runs: list[tuple[Any, list[Kill]]] = []
    for _attempt in range(attempts):
        result, kills = _run_killing_once(api, pgid, action, left, victim, executors, deadline)
        if kills:
            wait_for_executors(api, executors, deadline)
            runs.append((result, kills))
            del left[: len(kills)]
        if not left:
            return runs
    raise AssertionError(
        f"the action ended before the kill was due in each of {attempts} runs: {len(left)} of {len(points)} kills "
        "never landed"
    )


def _run_killing_once(
    api: StatusApi,
    pgid: int,
    action: Callable[[], Any],
    points: Sequence[At],
    victim: Callable[[], int] | None,
    executors: int,
    deadline: float,
) -> tuple[Any, list[Kill]]:
    api.caught_up()
    before = {s["stageId"] for s in api.stages()}
    first = max(before, default=-1) + 1
    cached_before = {r["id"] for r in api.cached()}
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = action()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    def due(point: At) -> tuple[int, int] | None:
        """(stage, its finished tasks) when the kill at ``point`` is due."""
        if point.once_cached:
            done = [r for r in api.cached() if r["id"] not in cached_before]
            full = [r for r in done if r["numCachedPartitions"] == r["numPartitions"] > 0]
            return (-1, 0) if full else None
        if point.stage is None:
            # Found by its id (:func:`stages_of`) among the stages running now: a short reply,
            # read often. Listing every stage to count them, each poll took longer the more
            # queries the cluster had run, and a short stage could start and end between two.
            assert point.ordinal is not None
            chosen = first + point.ordinal
            stages = api.active_stages()
        else:
            stages = api.stages()
            started = sorted({s["stageId"] for s in stages} - before)
            # Stage ids of concurrent stages come in no fixed order: picked by what they are.
            latest = {s["stageId"]: s for s in sorted(stages, key=lambda s: s["attemptId"])}
            picked = [sid for index, sid in enumerate(started) if point.stage(latest[sid], index)]
            if not picked:
                return None
            chosen = min(picked)
        attempts = [s for s in stages if s["stageId"] == chosen]
        if not attempts:
            return None
        attempt = max(attempts, key=lambda s: s["attemptId"])
        if attempt["status"] == "ACTIVE" and attempt["numCompleteTasks"] >= point.completed:
            return chosen, attempt["numCompleteTasks"]
        return None

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def replaced(known: set[str]) -> bool:
        """Whether an executor started since ``known`` was listed has registered, and the
        cluster has ``executors`` again (a lost executor may be listed a while after its loss)."""
        live = api.executor_ids()
        return len(live) >= executors and bool(live - known)

    kills: list[Kill] = []
    known: set[str] = set()
    while thread.is_alive() and len(kills) < len(points) and time.monotonic() < deadline:
        point = points[len(kills)]
        if (found := due(point)) is not None and (not kills or replaced(known)):
            known = api.executor_ids()
            pid = victim() if victim is not None else executor_pids(pgid)[0]
            os.kill(pid, signal.SIGKILL)
            kills.append(Kill(-1 if point.ordinal is None else point.ordinal, found[0], found[1], pid))
        time.sleep(0.05)
    thread.join(timeout=max(deadline - time.monotonic(), 1.0))
    if thread.is_alive():
        raise TimeoutError("the action did not end within the timeout")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"], kills


def wait_for_executors(api: StatusApi, executors: int, deadline: float) -> None:
    """Until the cluster has ``executors`` live executors (a killed one is replaced)."""
    while api.live_executors() < executors:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not get back to {executors} executors")
        time.sleep(0.5)
