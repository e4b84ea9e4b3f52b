"""``examples/embed_secure_sum.py`` and ``examples/embed_ckks.py``: separate processes, bytes only.

Each runs as its own script (a server process and one process per client over asyncio streams) and
writes its outcome as JSON; the sums must equal the plaintext sums: the secure sum exactly in the
ring with a client dropped mid-call, the CKKS sum within its tolerance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / f"{name}.py"), *args, "--json", str(out)],
                          check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_the_secure_sum_over_processes_equals_the_plaintext_sum_with_a_client_dropped(tmp_path: Path) -> None:
    outcome = run_example("embed_secure_sum", tmp_path, "--clients", "5", "--drop", "3")
    assert outcome["contributors"] == ["client/0", "client/1", "client/2", "client/4"]
    assert outcome["drops"] == {"client/3": "no_response"}
    assert outcome["ring_exact"] is True and outcome["within_error_bound"] is True
    assert outcome["total"][-1] == sum(40 + 10 * k for k in (0, 1, 2, 4))  # the survivors' example counts
    assert any(abs(v) > 1e-3 for v in outcome["total"][:-1])  # real, non-zero model updates


def test_the_ckks_sum_over_processes_is_within_tolerance_with_the_key_at_a_client(tmp_path: Path) -> None:
    outcome = run_example("embed_ckks", tmp_path, "--clients", "4", "--drop", "2")
    assert outcome["contributors"] == ["client/0", "client/1", "client/3"] and outcome["dropped"] == ["client/2"]
    assert outcome["server_holds_public_context_only"] is True
    assert outcome["within_tolerance"] is True and outcome["max_abs_error"] <= outcome["tolerance"]
    assert abs(outcome["total"][-1] - sum(40 + 10 * k for k in (0, 1, 3))) < 1e-3
