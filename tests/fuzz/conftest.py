"""Hypothesis profiles for the fuzz suite: a bounded ``ci`` run and a long ``fuzz`` run on demand.

Every fuzz test is decorated with ``@settings(settings.get_profile(ACTIVE))`` through
:data:`FUZZ`, never with a globally loaded profile, so running the whole test suite does not change
the example counts of the other property tests.

Choosing the profile (first match wins):

- ``--hypothesis-profile=fuzz`` (or ``=ci``) on the pytest command line, when ``tests/fuzz`` is
  one of the paths given (the profiles are registered by this file, which pytest then loads
  before the hypothesis plugin reads the option);
- ``SECUREFG_FUZZ=1`` in the environment selects ``fuzz``;
- otherwise ``ci``.

``SECUREFG_FUZZ_EXAMPLES=N`` sets the ``fuzz`` profile's examples per test (default 5000).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

#: The name every fuzz module reads its settings from (an alias of ``ci`` or ``fuzz``).
ACTIVE = "securefg-fuzz-active"

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,  # a 2-core machine shared with other jobs: wall time is no signal
    derandomize=True,  # the same cases on every CI run: a red CI is reproducible
    database=None,
    suppress_health_check=_SUPPRESSED,
    print_blob=True,
)
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("SECUREFG_FUZZ_EXAMPLES", "5000")),
    deadline=None,
    suppress_health_check=_SUPPRESSED,
    print_blob=True,
)


def _selected(config: pytest.Config) -> str:
    cli = config.getoption("--hypothesis-profile", default=None)
    if cli in ("ci", "fuzz"):
        return str(cli)
    if os.environ.get("SECUREFG_FUZZ", "").strip() not in ("", "0"):
        return "fuzz"
    return "ci"


def pytest_configure(config: pytest.Config) -> None:
    """Alias the selected profile as :data:`ACTIVE` before the fuzz modules are imported."""
    settings.register_profile(ACTIVE, parent=settings.get_profile(_selected(config)))


def pytest_report_header(config: pytest.Config) -> str:
    return f"securefg fuzz profile: {_selected(config)} ({settings.get_profile(ACTIVE).max_examples} examples per test)"
