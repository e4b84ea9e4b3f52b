"""Single-host party processes forked from one start-up process: the run is built once, not once per party.

Every party process of ``--backend flower`` runs the same ``securefg party`` entry a site runs
on its own host (:func:`~securefg.integrations.flower.party.run_party`, with its own key folder,
run file and output folder). Started as fresh interpreters, each of N+1 processes imports torch
and PyG and builds the task again (loads the dataset, partitions it) before its first step; on a
2-core machine that start-up, not the protocol, was most of a Flower run.

So the launcher starts one fresh interpreter, the *start-up process*
(``python -m securefg.integrations.flower.forked``), which reads the run file, builds the run
once, exactly as a party would, and forks every party from there. Each party starts with the
modules and the task already in memory (copy-on-write) and drops every other client's
partition before it talks, as a fresh process does after building it. The start-up process is
fresh, so no gRPC channel or server exists in it before the fork (a gRPC core does not survive
one), and it runs torch on one thread (no OpenMP pool to break). It writes its children's
process ids (``parties.pids.json``, for tests that kill a party) and, once they exited, their
exit codes (``parties.codes.json``). CPU runs only: a CUDA context does not survive a fork,
so GPU runs start one fresh process per party
(:class:`~securefg.integrations.flower.launcher.FlowerProcesses`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from securefg.federation.party import SERVER, client_id, is_client

PIDS = "parties.pids.json"
CODES = "parties.codes.json"


class ForkedParties:
    """The launcher's handle on a start-up process and the parties it forks (same interface
    as :class:`~securefg.integrations.flower.launcher.FlowerProcesses`).

    Args:
        workdir (Path): The provisioned work folder.
        clients (int): Number of client processes.
        address (str): The server's loopback address.
        helpers (tuple[str, ...]): Helper parties with their own process. (default: none)
        nice (int): ``nice`` increment of the parties. (default: ``0``)
    """

    def __init__(self, workdir: Path, clients: int, *, address: str, helpers: tuple[str, ...] = (),
                 nice: int = 0, parts: tuple[Any, Any, Any] | None = None) -> None:
        self.workdir, self.clients, self.address, self.helpers, self.nice = workdir, clients, address, helpers, nice
        self.parts = parts
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: dict[str, int] = {}

    def start(self) -> None:
        """Fork the parties: from this process when ``parts`` were given (the caller checked
        :func:`can_fork_here`), else from a fresh start-up process."""
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        if self.parts is not None:
            _preload_transport()
            self.pids = fork_all(self.workdir, self.address, self.clients, self.helpers, self.parts, self.nice)
            return
        log = (self.workdir / "logs" / "startup.log").open("wb")
        cmd = [sys.executable, "-m", "securefg.integrations.flower.forked", "--workdir", str(self.workdir),
               "--address", self.address, "--clients", str(self.clients), "--nice", str(self.nice),
               *(x for h in self.helpers for x in ("--helper", h))]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [os.environ.get("PYTHONPATH", ""), *sys.path] if p),
               "GRPC_ENABLE_FORK_SUPPORT": "0", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)

    def _party_pids(self, timeout: float = 600.0) -> dict[str, int]:
        """The parties' process ids, once the start-up process has forked them."""
        path = self.workdir / PIDS
        deadline = time.monotonic() + timeout
        while not self.pids:
            if path.exists():
                self.pids = {k: int(v) for k, v in json.loads(path.read_text()).items()}
                break
            if self.proc is not None and self.proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        return self.pids

    def kill(self, pid: str) -> None:
        """SIGKILL one party's process (how tests make a client drop out mid-round); a party that
        already exited is left alone."""
        _kill_quietly(self._party_pids()[pid])

    def wait(self, timeout: float) -> dict[str, int]:
        """Wait for the parties (the start-up process reaps them); kill whatever is left. Returns
        exit codes (``-9`` for a party killed by SIGKILL, as ``subprocess`` reports it)."""
        if self.proc is None:  # forked from this process: reap them here
            return reap_all(self.pids, timeout=timeout)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for ospid in self._party_pids(timeout=0).values():
                _kill_quietly(ospid)
            self.proc.wait()
        codes_path = self.workdir / CODES
        if codes_path.exists():
            return {k: int(v) for k, v in json.loads(codes_path.read_text()).items()}
        # the start-up process itself failed (its log says why): no party ran to completion
        return {pid: int(self.proc.returncode or 1) for pid in (SERVER, *self.helpers,
                                                               *(client_id(k) for k in range(self.clients)))}

    def log_tail(self, pid: str, chars: int = 3000) -> str:
        out = ""
        for name in (pid.replace("/", "_"), "startup"):
            path = self.workdir / "logs" / (name + ".log")
            if path.exists():
                out += path.read_text(errors="replace")[-chars:]
        return out


def _kill_quietly(ospid: int) -> None:
    try:
        os.kill(ospid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------- the start-up process
def _fork_party(workdir: Path, pid: str, role: str, address: str, parts: tuple[Any, Any, Any], nice: int) -> int:
    """Fork party ``pid``; in the child, run it and leave with its exit code."""
    from securefg.integrations.flower.launcher import party_namespace

    args = party_namespace(workdir, pid, role, address)
    log = workdir / "logs" / (pid.replace("/", "_") + ".log")
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child:
        return child
    code = 1
    try:  # the child never returns into the start-up process's loop
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.stdout = sys.stderr = os.fdopen(os.dup(fd), "w", buffering=1)
        if nice:
            os.nice(nice)
        import torch

        from securefg.federation.program import timing

        timing.reset()
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))  # one party, one thread
        code = _run_party(args, parts)
    except BaseException:  # noqa: BLE001 -- report anything, then leave
        traceback.print_exc()
    finally:
        from securefg.federation.program import timing

        timing.flush()
        sys.stdout.flush()
        os._exit(code)


def _run_party(args: Any, parts: tuple[Any, Any, Any]) -> int:
    import logging

    from securefg.errors import SecureFGError
    from securefg.integrations.flower.party import run_party

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True)
    try:
        return run_party(args, parts=parts)
    except SecureFGError as exc:
        print(f"securefg: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def can_fork_here() -> bool:
    """Whether this process may fork the parties itself: it runs a single native thread (so no
    other thread holds a lock the children would inherit, and no gRPC core is running)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # not Linux: leave it to a fresh start-up process
        return False


def fork_all(workdir: Path, address: str, clients: int, helpers: tuple[str, ...], parts: tuple[Any, Any, Any],
             nice: int) -> dict[str, int]:
    """Fork the server, the helpers and the clients; returns their process ids."""
    pids = {SERVER: _fork_party(workdir, SERVER, "server", address, parts, nice)}
    for pid in [*helpers, *(client_id(k) for k in range(clients))]:
        pids[pid] = _fork_party(workdir, pid, "client" if is_client(pid) else "helper", address, parts, nice)
    return pids


def reap_all(pids: dict[str, int], *, timeout: float) -> dict[str, int]:
    """Wait for every party (at most ``timeout`` seconds, and 30 s past the server's end: the run
    is over then); kill what is left. Returns exit codes (-9: killed)."""
    codes: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    server_done: float | None = None
    while len(codes) < len(pids):
        for pid, ospid in pids.items():
            if pid not in codes:
                got, status = os.waitpid(ospid, os.WNOHANG)
                if got:
                    codes[pid] = os.waitstatus_to_exitcode(status)
        if SERVER in codes and server_done is None:
            server_done = time.monotonic()
        if time.monotonic() > deadline or (server_done is not None and time.monotonic() - server_done > 30.0):
            for pid, ospid in pids.items():
                if pid not in codes:
                    _kill_quietly(ospid)
                    _, status = os.waitpid(ospid, 0)
                    codes[pid] = os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    return codes


def _preload_transport() -> None:
    """Import (never start) what every party's transport needs, once, before the fork: each
    party importing Flower and gRPC on its own cost seconds of CPU apiece. Importing creates no
    gRPC core state (no channel or server exists until a party opens its own)."""
    import importlib

    for module in ("grpc", "flwr.clientapp", "flwr.compat.client.app", "flwr.server.client_manager",
                   "flwr.server.server", "flwr.server.superlink.fleet.grpc_bidi.grpc_server",
                   "securefg.integrations.flower.grid", "securefg.integrations.flower.runtime"):
        importlib.import_module(module)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="build a run once and fork its party processes (single host)")
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--address", required=True)
    p.add_argument("--clients", type=int, required=True)
    p.add_argument("--helper", action="append", default=[])
    p.add_argument("--nice", type=int, default=0)
    a = p.parse_args(argv)

    import torch

    from securefg.integrations.flower import deploy
    from securefg.integrations.flower.party import _run_parts

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))  # one party, one thread
    _preload_transport()
    options, _ = deploy.read_run_table(a.workdir / "run.toml")
    parts = _run_parts(deploy.run_config(options, a.workdir / "run.toml"))
    pids = fork_all(a.workdir, a.address, a.clients, tuple(a.helper), parts, a.nice)
    tmp = a.workdir / (PIDS + ".tmp")
    tmp.write_text(json.dumps(pids))
    tmp.replace(a.workdir / PIDS)
    codes = reap_all(pids, timeout=float("inf"))
    (a.workdir / CODES).write_text(json.dumps(codes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
