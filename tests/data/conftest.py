"""Fixtures for securefg.data tests.

Every test gets its own ``SECUREFG_CACHE`` unless it asks for the session-wide real-data cache,
so nothing is written to ``~/.cache`` and processed files never leak between synthetic tests.
Real-data tests read ``SECUREFG_DATA`` and are skipped when it is unset.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("SECUREFG_CACHE", str(cache))
    monkeypatch.delenv("SECUREFG_OFFLINE", raising=False)
    return cache


@pytest.fixture(scope="session")
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("securefg-realdata-cache")


@pytest.fixture
def data_root(_session_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The real dataset root from ``SECUREFG_DATA`` (test skipped if unset), offline."""
    root = os.environ.get("SECUREFG_DATA")
    if not root:
        pytest.skip("SECUREFG_DATA is not set")
    # One processed copy per test session: processing Cora or MUTAG once is enough.
    monkeypatch.setenv("SECUREFG_CACHE", str(_session_cache))
    monkeypatch.setenv("SECUREFG_OFFLINE", "1")
    return Path(root)
