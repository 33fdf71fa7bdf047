"""Spark's REST status API on loopback: the stages, jobs, cached blocks and executors of a
server's one application, as the tests read them."""

from __future__ import annotations

import datetime
import json
import time
import urllib.request
from typing import Any


class StatusApi:
    """The stages and executors of the one application of a Spark UI on loopback."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1/applications"
        self.app = self._get("")[0]["id"]

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base}{path}", timeout=30) as reply:
            return json.load(reply)

    def stages(self) -> list[dict[str, Any]]:
        """Every stage attempt so far."""
        return self._get(f"/{self.app}/stages")  # type: ignore[no-any-return]

    def tasks(self, stage: dict[str, Any]) -> list[dict[str, Any]]:
        """The tasks of one stage attempt (an entry of :meth:`stages`), with their metrics."""
        path = f"/{self.app}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=100000"
        return self._get(path)  # type: ignore[no-any-return]

    def cached(self) -> list[dict[str, Any]]:
        """The cached RDDs (``persist``), with their partitions cached so far."""
        return self._get(f"/{self.app}/storage/rdd")  # type: ignore[no-any-return]

    def live_executors(self) -> int:
        return sum(1 for e in self._get(f"/{self.app}/executors") if e["id"] != "driver")

    def jobs_submitted_since(self, since: float) -> list[str]:
        """The jobs submitted at or after the epoch time ``since``, once the UI's list has
        settled (it learns of a job from an asynchronous event bus). Selecting by submission
        time, not by count, keeps a job of an earlier test that the bus reports late out."""
        listings: list[list[dict[str, Any]]] = []
        while len(listings) < 3 or len({len(jobs) for jobs in listings[-3:]}) > 1:
            listings.append(self._get(f"/{self.app}/jobs"))
            time.sleep(0.5)
        floor = int(since * 1000) / 1000  # the UI keeps milliseconds

        def submitted(job: dict[str, Any]) -> float:
            stamp = datetime.datetime.strptime(job["submissionTime"], "%Y-%m-%dT%H:%M:%S.%f%Z")
            return stamp.replace(tzinfo=datetime.UTC).timestamp()

        return [
            f"{job['jobId']}: {job.get('description') or job['name']}"
            for job in listings[-1]
            if "submissionTime" in job and submitted(job) >= floor
        ]
