"""The reference site (mkdocs.yml: docs/*.md and securefg.api's docstrings) builds without a warning.

``mkdocs build --strict`` fails on any warning: a broken link or anchor between pages, a page left
out, an unresolved cross-reference, a docstring parameter that is not in the signature. CI installs
the tools with the dev extra; without them this test is skipped, naming the extra.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
                    reason='the reference site needs mkdocs and mkdocstrings: pip install -e ".[docs]" (dev has them)')
def test_the_reference_site_builds_in_strict_mode_without_warnings(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(tmp_path / "site")], check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert proc.returncode == 0 and not warnings, "\n".join(warnings) or log
    page = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    for name in ("SecureSumClient", "CKKSKeyHolder", "RelayMember", "DPGaussianNoise", "TooFewSurvivorsError"):
        assert f'id="securefg.api.{name}"' in page, f"{name} is missing from the API reference"
    assert (tmp_path / "site" / "embedding" / "index.html").exists()
