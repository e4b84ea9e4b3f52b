"""Every CLI failure ends in one ``securefg: error:`` line and exit code 2; a traceback only with ``--debug``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from securefg.cli import main
from tests.data.planetoid_files import crafted_calls, write_crafted, write_tiny_planetoid

RUN = ["run", "--method", "fedavg", "--dataset", "csbm", "--clients", "3", "--rounds", "1", "--hidden", "8"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SECUREFG_OFFLINE", "1")


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("securefg: error: "), err
    return lines[0]


def test_partition_refuses_a_crafted_pickle_in_the_data_root_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = write_tiny_planetoid(tmp_path / "root")
    marker = tmp_path / "ran"
    write_crafted(raw / "ind.cora.x", crafted_calls(marker)["os.system"])
    code = main(["partition", "--dataset", "Cora", "--clients", "2", "--partition", "random",
                 "--data-root", str(tmp_path / "root")])
    line = _one_error_line(capsys)
    assert code == 2 and not marker.exists()
    assert f"UnsafeDataFileError: {raw / 'ind.cora.x'}: refused to load: the pickle calls" in line


def test_partition_reports_a_truncated_dataset_file_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = write_tiny_planetoid(tmp_path / "root")
    data = (raw / "ind.cora.graph").read_bytes()
    (raw / "ind.cora.graph").write_bytes(data[:100])
    code = main(["partition", "--dataset", "Cora", "--clients", "2", "--partition", "random",
                 "--data-root", str(tmp_path / "root")])
    assert code == 2
    assert f"DatasetFileError: {raw / 'ind.cora.graph'}: cannot be read as a pickle" in _one_error_line(capsys)


def test_a_stack_file_that_is_not_utf8_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_bytes(b'name = "caf\xe9"\n')
    code = main([*RUN, "--protocol", str(stack), "--out", str(tmp_path / "out")])
    assert code == 2
    assert f"ConfigError: {stack}: not valid UTF-8 (byte 11)" in _one_error_line(capsys)
    assert not (tmp_path / "out" / "result.json").exists()


def test_a_threat_model_that_is_not_utf8_is_the_audit_config_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tm = tmp_path / "tm.toml"
    tm.write_bytes(b"\xff\xfe")
    code = main(["audit", "--threat-model", str(tm), *RUN[1:], "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{tm}: not valid UTF-8 (byte 0)" in err and "exit 2:" in err


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("", r"--out is empty"),
        ("   ", r"--out is empty"),
        ("{file}", r"--out .*/taken: is a file, not a folder"),
        ("{file}/sub", r"--out .*/taken/sub: cannot be created: .*/taken is a file"),
    ],
)
@pytest.mark.parametrize("command", ["run", "audit"])
def test_a_bad_out_folder_fails_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, out: str, message: str,
    command: str,
) -> None:
    import securefg.experiment

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run started")

    monkeypatch.setattr(securefg.experiment, "run_experiment", must_not_run)
    (tmp_path / "taken").write_text("a file")
    argv = [*RUN, "--out", out.format(file=tmp_path / "taken")]
    if command == "audit":
        argv = ["audit", "--threat-model", "curious_server", *argv[1:]]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.startswith("securefg") and re.search(message, err), err


def test_an_unwritable_out_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")  # chmod does not stop root, so simulate the mount

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    code = main([*RUN, "--out", str(tmp_path / "ro")])
    assert code == 2
    assert f"ConfigError: --out {tmp_path / 'ro'}: cannot write in {tmp_path} (Permission denied)" in _one_error_line(capsys)


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from securefg.commands import summarize_cmd

    def broken(args: object) -> int:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(summarize_cmd, "run", broken)
    assert main(["summarize", "x"]) == 2
    line = _one_error_line(capsys)
    assert line == "securefg: error: unexpected RuntimeError: boom second line (run `securefg --debug ...` for the traceback)"
    assert main(["--debug", "summarize", "x"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().endswith("unexpected RuntimeError: boom second line")


def test_a_file_error_of_a_command_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["partition", "--dataset", "csbm", "--clients", "2", "--save", str(tmp_path)])  # a folder, not a file
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("securefg: error: IsADirectoryError:")
