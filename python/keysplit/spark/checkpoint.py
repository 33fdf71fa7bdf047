"""Finished windows on local disk, so that a stopped run resumes where it stopped.

The directory holds one Parquet file per finished window (its final, merged result) and
``manifest.json``, which lists the finished windows with what the client and Spark saw of
each, under a fingerprint of the run's arguments. Both are written to a temporary name and
renamed into place, so a crash leaves either the old manifest or the new one, never half of
one; a window counts as finished only once the manifest names it, after its file is in
place. A re-run with the same arguments routes the whole stream again (the grouper's state
must evolve as before), checks that each finished window gets the same rows and loads,
skips ingesting and aggregating it, and goes on from the first window not in the manifest.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from keysplit._errors import ConfigError, KeyInputError, SnapshotError

if TYPE_CHECKING:
    from keysplit.spark.report import WindowReport

MANIFEST = "manifest.json"
_FORMAT = 2


def _write_atomically(path: Path, write: Any) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    write(temporary)
    with open(temporary, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, (int, str, float, bool)) or value is None else repr(value)


class Checkpoint:
    """The finished windows of one run in ``directory``."""

    def __init__(self, directory: Path, fingerprint: dict[str, Any], windows: list[dict[str, Any]]) -> None:
        self.directory = directory
        self.fingerprint = fingerprint
        self.windows = windows
        self._by_id = {json.dumps(_jsonable(w["window"])): w for w in windows}

    @classmethod
    def open(cls, directory: str | Path, *, fingerprint: dict[str, Any]) -> Checkpoint:
        """The checkpoint in ``directory``, made if missing; refuses another run's."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        fingerprint = json.loads(json.dumps(fingerprint, default=repr))
        manifest = path / MANIFEST
        if not manifest.exists():
            return cls(path, fingerprint, [])
        try:
            stored = json.loads(manifest.read_text())
        except (OSError, ValueError) as error:
            raise SnapshotError(f"the checkpoint manifest {manifest} is unreadable: {error}") from None
        if stored.get("format") != _FORMAT or stored.get("fingerprint") != fingerprint:
            differing = sorted(
                k
                for k in set(fingerprint) | set(stored.get("fingerprint", {}))
                if fingerprint.get(k) != stored.get("fingerprint", {}).get(k)
            )
            raise ConfigError(
                f"the checkpoint in {path} belongs to a run with other arguments (differing: "
                f"{', '.join(differing) or 'format'}); use another directory or delete it"
            )
        return cls(path, fingerprint, stored["windows"])

    def window(self, window_id: Any) -> dict[str, Any] | None:
        """The manifest's entry of a finished window, or None."""
        return self._by_id.get(json.dumps(_jsonable(window_id)))

    def commit(self, window_id: Any, result: pa.Table, report: WindowReport) -> None:
        """Writes a finished window's result, then names it in the manifest."""
        name = f"window-{len(self.windows):06d}.parquet"
        _write_atomically(self.directory / name, lambda p: pq.write_table(result, p))
        entry = {
            "window": _jsonable(window_id),
            "file": name,
            "result_rows": result.num_rows,
            **{k: v for k, v in asdict(report).items() if k not in ("window", "resumed")},
        }
        windows = [*self.windows, entry]
        text = json.dumps({"format": _FORMAT, "fingerprint": self.fingerprint, "windows": windows}, indent=1)
        _write_atomically(self.directory / MANIFEST, lambda p: p.write_text(text))
        self.windows = windows
        self._by_id[json.dumps(_jsonable(window_id))] = entry

    def result(self) -> pa.Table:
        """Every finished window's result, in window order of arrival."""
        tables = [pq.read_table(self.directory / w["file"]) for w in self.windows]
        if not tables:
            raise KeyInputError(f"the checkpoint in {self.directory} holds no finished window")
        return pa.concat_tables(tables, promote_options="permissive")
