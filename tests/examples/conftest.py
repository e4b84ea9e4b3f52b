"""Shared helper for tests of the scripts in ``examples/`` (they are files, not a package)."""

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def load_example() -> Callable[[str], ModuleType]:
    """``load_example("name")`` imports ``examples/name.py`` afresh."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
