"""Every command in the README and in docs/tutorial.md runs as written, so the docs cannot rot.

Each ``bash`` block of the two files is read line by line: ``export`` lines set the environment
(the data root, exported once at the top), ``securefg ...`` lines run in this process through
:func:`securefg.cli.main` in a fresh folder (a clone's root, where ``out/`` is written), in the
order the page gives them. Every other line must be named in :data:`NOT_RUN` with the reason, so a
new kind of command cannot slip past unrun. To keep CI fast, ``--rounds 1`` and a method's tiny
model settings are appended (argparse keeps the last value of a flag; ``--option`` keys override):
the commands run, on the real data, with everything else as written.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from securefg.cli import main

REPO = Path(__file__).resolve().parents[1]

#: Lines of the docs' bash blocks this test does not run, and where they are run instead.
NOT_RUN: dict[str, str] = {
    'pip install torch==2.13.0 && pip install -e ".[dev]" && python examples/cefgc_he.py':
        ".ci/run installs; tests/examples/test_cefgc_he.py runs the example",
    "SECUREFG_DATA=../shared/datasets python -m pytest -q": "the test command itself (.ci/run)",
    "SECUREFG_FUZZ=1 python -m pytest -q tests/fuzz": "the fuzz profile (5000 cases a test); CI runs its ci profile",
    "python -m pytest -q tests/fuzz": "the fuzz suite, part of the test command",
    "securefg audit --matrix --quick": "tests/audit/matrix/test_quick_matrix.py runs it (minutes; once is enough)",
}
#: Settings appended to every ``run`` and ``audit``, and per method (the model's size, not the protocol).
TINY_RUN = ["--rounds", "1"]
TINY_OPTIONS: dict[str, list[str]] = {
    "cefgc": ["diffusion_epochs=1", "gnn_epochs=2", "langevin_steps=1"],
    "fedstruct": ["structure_hops=2", "node2vec_epochs=1"],
    "fedsheafhn": ["warmup_epochs=1"],
    "fedsage_plus": ["gen_local_steps=2", "gen_fed_steps=1"],
}
#: ``reproduce <paper> --quick`` narrowed to its cheapest cell (the others are the same code path).
TINY_REPRODUCE: dict[str, list[str]] = {
    "cefgc": ["--datasets", "MUTAG", "--methods", "centralized"],
    "fedsage": ["--rows", "FedSage", "--stacks", "plaintext"],
    "fedstruct": ["--rows", "Local GNN"],
    "fedpub": ["--rows", "FedAvg", "--stacks", "plaintext"],
    "fedsheafhn": ["--stacks", "plaintext"],
}


def bash_lines(page: Path) -> Iterator[str]:
    """The command lines of ``page``'s ``bash`` blocks (continuations joined, comments dropped)."""
    text = page.read_text(encoding="utf-8")
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                yield line


def tiny(argv: list[str]) -> list[str]:
    """``argv`` with the tiny settings appended (see the module docstring)."""
    command = argv[0]
    if command in ("run", "audit") and "--list-options" not in argv:
        method = argv[argv.index("--method") + 1]
        family = "cefgc" if method.startswith("cefgc") else method
        extra = [x for opt in TINY_OPTIONS.get(family, []) for x in ("--option", opt)]
        return [*argv, *TINY_RUN, *extra, "--no-progress"] if command == "run" else [*argv, *TINY_RUN, *extra]
    if command == "reproduce" and "--quick" in argv and "--dry-run" not in argv:
        return [*argv, *TINY_REPRODUCE[argv[1]]]
    return argv


def run_page(page: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
             data_root: Path) -> list[tuple[str, float]]:
    """Run every command of ``page`` in ``workdir``; return (command, seconds) per command."""
    monkeypatch.chdir(workdir)
    ran: list[tuple[str, float]] = []
    for line in bash_lines(page):
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            # the page's relative path is the repository's neighbour; here it is the real root
            monkeypatch.setenv(name, str(data_root) if name == "SECUREFG_DATA" else value)
            continue
        if not line.startswith("securefg "):
            assert line in NOT_RUN, f"{page.name}: {line!r} is neither a securefg command nor listed in NOT_RUN"
            continue
        if line in NOT_RUN:  # a securefg command run by its own test (named in NOT_RUN)
            continue
        argv = shlex.split(line)[1:]
        t0 = time.perf_counter()
        try:
            code = main(tiny(argv))
        except SystemExit as stop:  # --list-options and --help exit like argparse does
            code = int(stop.code or 0)
        seconds = time.perf_counter() - t0
        out, err = capsys.readouterr()
        allowed = {0, 1} if argv[0] == "audit" else {0}  # an audit's 1 is a verdict (a budget exceeded)
        assert code in allowed, f"{page.name}: `{line}` exited {code}:\n{err[-2000:]}"
        check_outputs(argv, workdir, out)
        ran.append((line, seconds))
    return ran


def check_outputs(argv: list[str], workdir: Path, out: str) -> None:
    """What a command promises to leave behind (and, for ``run``, what it must not)."""
    if argv[0] == "run" and "--out" in argv:
        folder = workdir / argv[argv.index("--out") + 1]
        assert (folder / "result.json").is_file(), folder
        assert (folder / "checkpoint.pt").is_file() == ("--checkpoint-every" in argv), "a checkpoint nobody asked for"
        assert "metrics_doc" in out or "what each number scores" in out
    if argv[0] == "audit":
        assert (workdir / argv[argv.index("--out") + 1] / "report.md").is_file()


@pytest.fixture()
def real_root(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = os.environ.get("SECUREFG_DATA")
    if not root:
        pytest.skip("SECUREFG_DATA is not set")
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path_factory.getbasetemp() / "docs-cache"))
    monkeypatch.setenv("SECUREFG_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return (REPO / root).resolve() if not Path(root).is_absolute() else Path(root)


def test_every_line_of_the_docs_bash_blocks_is_run_or_named() -> None:
    for page in (REPO / "README.md", REPO / "docs" / "tutorial.md"):
        lines = list(bash_lines(page))
        assert any(x.startswith("securefg ") for x in lines), page
        odd = [x for x in lines if not x.startswith(("securefg ", "export ")) and x not in NOT_RUN]
        assert not odd, f"{page.name}: add these to NOT_RUN with the reason, or make them securefg commands: {odd}"


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.parametrize("page", ["README.md", "docs/tutorial.md"])
def test_every_command_of_the_page_runs_as_written(page: str, tmp_path: Path, real_root: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ran = run_page(REPO / page, tmp_path, monkeypatch, capsys, real_root)
    assert len(ran) >= 5
    with capsys.disabled():  # the timings, for the record (pytest -s shows them)
        if os.environ.get("SECUREFG_DOCS_TIMINGS"):
            print("\n" + "\n".join(f"{s:7.1f} s  {c}" for c, s in ran))
