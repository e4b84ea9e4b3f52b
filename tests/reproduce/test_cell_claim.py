"""Claims on cell folders: two `securefg reproduce` side by side never run one cell twice."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from securefg.experiment import RunConfig
from securefg.reproduce import cell_runner
from securefg.reproduce.cefgc_cells import plan
from securefg.reproduce.cell_claim import CLAIM_FILE, Holder, claimed, holder
from securefg.reproduce.cell_runner import run_cells

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="claims need fcntl.flock")


class FakeRuns:
    """Stands in for ``run_experiment``: counts calls and writes the result.json a run would."""

    def __init__(self) -> None:
        self.calls: list[RunConfig] = []

    def __call__(self, cfg: RunConfig) -> dict[str, Any]:
        self.calls.append(cfg)
        res = {"method": cfg.method, "seed": cfg.seed, "config": {"dataset": cfg.dataset}, "metrics": {"test_auc": 0.5}}
        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        (Path(cfg.out) / "result.json").write_text(json.dumps(res))
        return res


def test_a_held_claim_names_its_holder_and_is_free_again_after(tmp_path: Path) -> None:
    me = Holder(os.getpid(), socket.gethostname())
    assert holder(tmp_path / "cell") is None  # never claimed
    with claimed(tmp_path / "cell") as other:
        assert other is None
        with claimed(tmp_path / "cell") as second:  # a second claim (another open file) is refused
            assert second == me
        assert holder(tmp_path / "cell") == me
    assert holder(tmp_path / "cell") is None
    assert (tmp_path / "cell" / CLAIM_FILE).is_file()  # kept: deleting it could give two holders
    with claimed(tmp_path / "cell") as again:
        assert again is None


def test_a_killed_holder_leaves_no_stale_claim(tmp_path: Path) -> None:
    code = ("import sys, time\nfrom securefg.reproduce.cell_claim import claimed\n"
            "with claimed(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "cell")], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert holder(tmp_path / "cell") == Holder(proc.pid, socket.gethostname())
        with claimed(tmp_path / "cell") as other:
            assert other == Holder(proc.pid, socket.gethostname())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert holder(tmp_path / "cell") is None  # the kernel dropped the lock with the process
    with claimed(tmp_path / "cell") as other:
        assert other is None


def test_a_cell_running_elsewhere_is_skipped_and_picked_up_by_a_rerun(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    cells = plan(quick=True)[:3]
    with claimed(cells[1].folder(tmp_path)):  # as another `securefg reproduce` running that cell
        runs = FakeRuns()
        outcomes = run_cells(cells, out_root=tmp_path, run_fn=runs, show_progress=True)
    assert [o.status for o in outcomes] == ["ran", "busy", "ran"]
    assert [c.out for c in runs.calls] == [str(cells[0].folder(tmp_path)), str(cells[2].folder(tmp_path))]
    assert f"[2/3] {cells[1]}: running in pid {os.getpid()} on {socket.gethostname()} now, skipped" in capsys.readouterr().out
    rerun = FakeRuns()
    assert [o.status for o in run_cells(cells, out_root=tmp_path, run_fn=rerun, show_progress=False)] == \
        ["done", "ran", "done"]
    assert len(rerun.calls) == 1


def test_a_cell_finished_by_another_process_meanwhile_is_not_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cell = plan(quick=True)[0]
    real = cell_runner.claimed

    @contextlib.contextmanager
    def after_the_other_finished(folder: Path) -> Iterator[Holder | None]:
        FakeRuns()(RunConfig(method=cell.method.name, dataset=cell.setting.dataset, seed=cell.seed, out=str(folder)))
        with real(folder) as other:
            yield other

    monkeypatch.setattr(cell_runner, "claimed", after_the_other_finished)
    runs = FakeRuns()
    outcomes = run_cells([cell], out_root=tmp_path, run_fn=runs, show_progress=True)
    assert runs.calls == [] and [o.status for o in outcomes] == ["done"]
    assert "finished by another process meanwhile (kept)" in capsys.readouterr().out


def test_the_dry_run_says_which_cells_are_running_now(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from securefg.cli import main

    cells = plan(quick=True)
    page = str(tmp_path / "page.md")
    with claimed(cells[1].folder(tmp_path)):
        assert main(["reproduce", "cefgc", "--quick", "--dry-run", "--out", str(tmp_path), "--page", page]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (f"{cells[1]}: to run ({cells[1].folder(tmp_path)}); running now in pid {os.getpid()} on "
                        f"{socket.gethostname()}")
    assert "running now" not in lines[0] and "running now" not in lines[2]
