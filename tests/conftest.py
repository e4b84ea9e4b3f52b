"""Fixtures shared across the test packages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Run a module's tests on one torch thread (diffusion training is thread-count sensitive
    and oversubscribes a 2-core machine), restoring the previous count after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
