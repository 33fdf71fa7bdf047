"""Comparing a grouper with its reference twin, as every family's tests do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keysplit

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence


def assert_routes_like_twin(
    name: str,
    make_twin: Callable[..., Any],
    stream: Sequence[Any],
    n: int,
    seed: int,
    params: dict[str, Any],
    ends: Collection[int] = (),
    *,
    as_batch: bool = True,
) -> None:
    """The grouper ``name`` routes ``stream`` key by key as ``make_twin(n, seed, **params)``
    does, with a window end before each tuple index in ``ends``, and ends with the twin's
    loads; with ``as_batch``, the whole stream routed as one batch (no window ends) equals
    the twin too."""
    twin = make_twin(n, seed, **params)
    grouper = keysplit.Grouper(name, workers=n, seed=seed, **params)
    for i, key in enumerate(stream):
        if i in ends:
            twin.end_window()
            grouper.end_window()
        assert grouper.route_key(key) == twin.route(key), f"tuple {i}"
    assert grouper.loads == twin.loads
    if as_batch:
        plain = make_twin(n, seed, **params)
        batch = keysplit.Grouper(name, workers=n, seed=seed, **params)
        assert (batch.route(stream).to_list() if stream else []) == [plain.route(k) for k in stream]
