"""A small in-process federation for the relay mechanism tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ..federation_fixture import Federation, build_federation

__all__ = ["Federation", "build_federation"]


@pytest.fixture
def make_federation() -> Callable[..., Federation]:
    return build_federation
