"""pytest plugin for redis-py's own tests against `ringdb serve` (scripts/redis-py-suite).

Marks the tests listed in suite_skips.txt (beside this file) skipped, each with the reason
it is listed under, and reports listed tests that were not collected (renamed or removed
upstream: the list should follow).
"""

import os
import re

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _skips():
    """The listed node ids, each with its reason."""
    skips, reason = {}, None
    with open(os.path.join(HERE, "suite_skips.txt"), encoding="utf-8") as listing:
        for line in listing:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                reason = line[1:].strip()
                continue
            if reason is None:
                raise pytest.UsageError(f"suite_skips.txt: {line} has no reason above it")
            skips[line] = reason
    return skips


def pytest_collection_modifyitems(config, items):
    skips, seen = _skips(), set()
    for item in items:
        node = re.sub(r"\[.*\]$", "", item.nodeid)
        if node in skips:
            seen.add(node)
            item.add_marker(pytest.mark.skip(reason="ringdb: " + skips[node]))
    stale = sorted(set(skips) - seen)
    for node in stale:
        print(f"suite_skips.txt lists a test that was not collected: {node}")
