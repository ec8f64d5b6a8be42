"""Tests marked ``xdist_group`` must run on one worker: the npm suites install into one
folder each, the benchmarks would slow the tests beside them, and some modules share one
server. pytest-xdist groups them by a suffix it adds to each test's node id; pytest 9.2
derives the node id from its own record instead, so the suffix was lost and groups spread
silently over the workers (two ran ``npm ci`` in one folder at once). pyproject pins
pytest below 9.2; this test fails whenever the grouping is lost again."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("grouping-check")
def test_a_grouped_test_is_scheduled_by_its_group(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):  # set on xdist's workers
        pytest.skip("only a --dist loadgroup run (scripts/test) groups tests")
    assert request.node.nodeid.endswith("@grouping-check"), request.node.nodeid
