"""The public API's names: pinned, importable, documented, and on the reference page."""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import securefg
from securefg import api

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]

#: The public surface. Removing or renaming a name breaks callers: bump the version as the policy
#: in docs/embedding.md says, list the change in CHANGELOG.md, then update this list.
PUBLIC = {
    "SecureSumConfig", "SecureSumClient", "SecureSumServer", "SecureSumResult", "ClientDropReason", "AbortReason",
    "CKKSConfig", "CKKSKeyHolder", "CKKSClient", "CKKSServer",
    "RelayConfig", "RelayMember", "RelayServer", "RelayShuffler", "SealingKey",
    "DPGaussianNoise", "PrivacyAccountant", "Release", "DPMode", "PrivacyUnit",
    "ProtocolStack", "FailedProtection",
    "SecureFGError", "ConfigError", "InvalidInputError", "ProtocolError", "CodecError", "AuthenticationError",
    "SenderAuthenticationError", "UnexpectedMessageError", "UnboundTagError", "MechanismError",
    "TooFewSurvivorsError", "InvalidClaimError", "ForgedClaimError", "KeySubstitutionError", "EquivocationError",
    "ImplausibleSumError", "OverflowRiskError", "RingTooSmallError", "SecretKeyError",
    "__version__",
}


def test_the_public_names_are_exactly_the_pinned_list() -> None:
    assert len(api.__all__) == len(set(api.__all__))
    assert set(api.__all__) == PUBLIC


def test_every_public_name_imports_from_securefg_api_and_has_a_docstring() -> None:
    fresh = importlib.reload(api)
    for name in sorted(PUBLIC - {"__version__"}):
        obj = getattr(fresh, name)
        assert (obj.__doc__ or "").strip(), f"securefg.api.{name} has no docstring"


def test_every_error_of_the_api_is_a_securefg_error() -> None:
    errors = [getattr(api, n) for n in PUBLIC if n.endswith("Error")]
    assert len(errors) == 19 and all(issubclass(e, api.SecureFGError) for e in errors)


def test_every_module_behind_the_api_is_private() -> None:
    modules = [m.name for m in pkgutil.iter_modules(api.__path__)]
    assert modules and all(m.startswith("_") for m in modules), modules


def test_the_reference_page_documents_exactly_the_public_names() -> None:
    page = (ROOT / "docs" / "reference" / "api.md").read_text()
    documented = set(re.findall(r"^::: securefg\.api\.(\w+)$", page, re.MULTILINE))
    assert documented == PUBLIC - {"__version__"}


def test_the_version_is_semver_and_heads_the_changelog() -> None:
    assert securefg.__version__ == api.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", securefg.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## (\d+\.\d+\.\d+)\s*$", changelog, re.MULTILINE)
    assert released and released[0] == securefg.__version__, "add a CHANGELOG.md section for the new version"


def test_pyproject_reads_the_version_from_the_one_place_it_is_written() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "securefg._version.__version__"}


def test_the_flower_entry_points_still_import() -> None:
    pytest.importorskip("flwr")
    from securefg.integrations.flower.mods import enable_securefg, securefg_mod
    from securefg.integrations.flower.workflow import SecureFedAvgWorkflow

    assert callable(securefg_mod) and callable(enable_securefg) and callable(SecureFedAvgWorkflow.train_round)
