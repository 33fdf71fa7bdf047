"""The smoke test of an installed keysplit wheel, as the release workflow runs it on each
platform's own runner (``python tests/release_smoke.py``): it needs only keysplit and its
one required dependency, Polars.

- the version the package reports is its metadata's;
- the compiled core routes a golden stream to the digests the Rust core's tests pin
  (``rust/keysplit-core/tests/choices.rs``), with integer and string keys: routing is
  frozen across machines and releases;
- a snapshot taken mid-stream restores, in this process, into a grouper that routes on
  as the uninterrupted one.

The full suite runs it too (tests/test_release.py), so its pins cannot drift.
"""

from __future__ import annotations

import importlib.metadata
import sys

import keysplit

# (grouper, workers, seed, params, FNV-1a digest of the workers the golden stream goes to).
GOLDEN_INTEGER_KEYS = [
    ("d_choices", 37, 12345, {}, 0x2CF8E04FC34974BE),
    ("d_choices", 64, (1 << 64) - 1, {"theta": 0.05, "distinct_candidates": False}, 0xA0F81874C7CE4848),
    ("d_choices", 64, (1 << 64) - 1, {"theta": 0.01, "capacity": 100, "epsilon": 0.0}, 0x8480A418833376CF),
    ("w_choices", 10, 0, {}, 0xB32BEDCC9623EB61),
    ("rr_head", 37, 12345, {"theta": 0.05, "distinct_candidates": False}, 0xF5405BA4724DDE6F),
]
# The same stream with its keys written as strings ("k<key>"), through the string path;
# pinned when written (0.1.0), like the Rust core's digests.
GOLDEN_STRING_KEYS = [
    ("pkg", 16, 7, {}, 0xB4E518EEFFFDB58B),
    ("elastic", 16, 7, {}, 0xDA2C4068FB1778F6),
]


def golden_stream() -> list[int]:
    """4000 keys, four of them hot (6 %, 4 %, 3 %, 2 %), the rest spread over 500."""

    def key(v: int) -> int:
        return 0 if v < 60 else 1 if v < 100 else 2 if v < 130 else 3 if v < 150 else v % 500

    return [key((i * 2654435761) % 1000) for i in range(4000)]


def fnv1a(routed: list[int]) -> int:
    h = 0xCBF29CE484222325
    for worker in routed:
        for byte in worker.to_bytes(4, "little"):
            h = ((h ^ byte) * 0x100000001B3) & ((1 << 64) - 1)
    return h


def routing_digest(name: str, workers: int, seed: int, params: dict, keys: list) -> int:
    return fnv1a(keysplit.Grouper(name, workers=workers, seed=seed, **params).route(keys).to_list())


def check_version() -> None:
    installed = importlib.metadata.version("keysplit")
    assert keysplit.__version__ == installed, f"keysplit.__version__ {keysplit.__version__} != metadata {installed}"


def check_golden_routing() -> None:
    stream = golden_stream()
    for keys, golden in ((stream, GOLDEN_INTEGER_KEYS), ([f"k{key}" for key in stream], GOLDEN_STRING_KEYS)):
        for name, workers, seed, params, digest in golden:
            found = routing_digest(name, workers, seed, params, keys)
            assert found == digest, f"{name}(workers={workers}, seed={seed}, {params}): {found:#018x} != {digest:#018x}"


def check_restore() -> None:
    stream = [f"k{key}" for key in golden_stream()]
    uninterrupted = keysplit.Grouper("elastic", workers=8, seed=3)
    interrupted = keysplit.Grouper("elastic", workers=8, seed=3)
    expected = uninterrupted.route(stream).to_list()
    head = interrupted.route(stream[:2500]).to_list()
    restored = keysplit.Grouper.restore(interrupted.snapshot())
    assert head + restored.route(stream[2500:]).to_list() == expected, "a restored grouper routes otherwise"


def main() -> None:
    check_version()
    check_golden_routing()
    check_restore()
    print(f"keysplit {keysplit.__version__} on {sys.platform}, Python {sys.version.split()[0]}: smoke test passed")


if __name__ == "__main__":
    main()
