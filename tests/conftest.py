from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def spark():
    """One real embedded Spark Connect server for the whole test session (keysplit.spark)."""
    from keysplit.spark import session

    with session(query_timeout=180.0) as handle:
        yield handle
    # Closing left no process of the server's group behind.
    with pytest.raises(ProcessLookupError):
        os.killpg(handle.server.pid, 0)
