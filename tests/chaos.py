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
from collections.abc import Callable
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
    ran = [s for s in api.stages_after(before) if s["attemptId"] == 0]
    return result, sorted(ran, key=lambda s: s["stageId"])


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
    """Run ``action``, killing one executor (or the process ``victim`` names) once the
    ``ordinal``-th stage it starts (or the first it starts that ``stage`` picks from its REST
    figures and its place among them) is running with at least ``completed`` finished tasks, or (``once_cached``)
    once a DataFrame it persists is wholly cached; then wait until the
    cluster has ``executors`` executors again. The status API is polled: a stage of a few
    short tasks can end between two polls (the more likely, the busier the machine), and then
    the action runs again, up to ``attempts`` times, until a kill lands; the result returned
    is always that of the run the kill landed in."""
    deadline = time.monotonic() + timeout
    for _attempt in range(attempts):
        result, kill = _run_killing_once(api, pgid, action, ordinal, stage, completed, once_cached, victim, deadline)
        if kill is not None:
            wait_for_executors(api, executors, deadline)
            return result, kill
    raise AssertionError(f"the action ended before the kill was due in each of {attempts} runs: no kill")


def _run_killing_once(
    api: StatusApi,
    pgid: int,
    action: Callable[[], Any],
    ordinal: int | None,
    stage: Callable[[dict[str, Any], int], bool] | None,
    completed: int,
    once_cached: bool,
    victim: Callable[[], int] | None,
    deadline: float,
) -> tuple[Any, Kill | None]:
    api.caught_up()
    before = {s["stageId"] for s in api.stages()}
    cached_before = {r["id"] for r in api.cached()}
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = action()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    def due() -> tuple[int, int] | None:
        """(stage, its finished tasks) when the kill is due."""
        if once_cached:
            done = [r for r in api.cached() if r["id"] not in cached_before]
            full = [r for r in done if r["numCachedPartitions"] == r["numPartitions"] > 0]
            return (-1, 0) if full else None
        stages = api.stages()
        started = sorted({s["stageId"] for s in stages} - before)
        if stage is not None:
            # Stage ids of concurrent stages come in no fixed order: picked by what they are.
            latest = {s["stageId"]: s for s in sorted(stages, key=lambda s: s["attemptId"])}
            picked = [sid for index, sid in enumerate(started) if stage(latest[sid], index)]
            if not picked:
                return None
            chosen = min(picked)
        else:
            assert ordinal is not None
            if len(started) <= ordinal:
                return None
            chosen = started[ordinal]
        attempt = max((s for s in stages if s["stageId"] == chosen), key=lambda s: s["attemptId"])
        if attempt["status"] == "ACTIVE" and attempt["numCompleteTasks"] >= completed:
            return chosen, attempt["numCompleteTasks"]
        return None

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    kill: Kill | None = None
    while thread.is_alive() and kill is None and time.monotonic() < deadline:
        if (found := due()) is not None:
            pid = victim() if victim is not None else executor_pids(pgid)[0]
            os.kill(pid, signal.SIGKILL)
            kill = Kill(-1 if ordinal is None else ordinal, found[0], found[1], pid)
        time.sleep(0.05)
    thread.join(timeout=max(deadline - time.monotonic(), 1.0))
    if thread.is_alive():
        raise TimeoutError("the action did not end within the timeout")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"], kill


def wait_for_executors(api: StatusApi, executors: int, deadline: float) -> None:
    """Until the cluster has ``executors`` live executors (a killed one is replaced)."""
    while api.live_executors() < executors:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not get back to {executors} executors")
        time.sleep(0.5)
