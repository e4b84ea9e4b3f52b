"""``securefg run ... --backend flower``: one OS process per party, then one ``result.json``.

The launcher is the experimenter, not a party: it provisions what each site would make for
itself (:mod:`~securefg.integrations.flower.deploy`: the run file, one key folder per party
with its own private key and its pinned copies of the directory and of the TLS CA), starts the
server process and N client processes on loopback with the same command a site runs on its own
host (``securefg party``), waits, and assembles ``result.json`` from what each party wrote
about itself: the transcripts of what each sent (merged, they are the in-process transcript),
the clients' per-round scores (the same per-client measurement the in-process runner reads from
party state) and the server's view. Byte counts come from the same sealed envelopes as in
process; Flower's own framing (routing fields, gRPC/protobuf overhead) is reported apart as
``flower``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from securefg.errors import CheckpointError, ConfigError, ProtocolError
from securefg.federation.party import SERVER, client_id, is_client
from securefg.federation.transcript import load_jsonl
from securefg.integrations.flower import deploy, require_flwr
from securefg.integrations.flower.party import out_file


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keys_dir(workdir: Path, pid: str) -> Path:
    """``pid``'s key folder in the launcher's work folder (on several hosts: the site's own)."""
    return workdir / "keys" / pid.replace("/", "_")


def provision(workdir: Path, cfg: Any, clients: int, helpers: tuple[str, ...] = ()) -> None:
    """What the sites and the coordinator of a deployment make, on one host (docs/flower.md,
    "Deploy on several hosts"): ``run.toml`` (configuration and session id), each party's key
    folder (``securefg keys new``) with its pinned copy of ``directory.json`` (``securefg keys
    directory``), the server's TLS files (``securefg certs``) and each node's copy of ``ca.pem``."""
    (workdir / "parties").mkdir(parents=True, exist_ok=True)
    deploy.write_run_file(workdir / "run.toml", cfg)
    pids = [SERVER, *(client_id(k) for k in range(clients)), *helpers]
    publics = [deploy.new_keys(pid, keys_dir(workdir, pid), force=True) for pid in pids]
    deploy.build_directory(publics, workdir / deploy.DIRECTORY)
    deploy.make_certs(keys_dir(workdir, SERVER), ["127.0.0.1"])
    for pid in pids:
        shutil.copyfile(workdir / deploy.DIRECTORY, keys_dir(workdir, pid) / deploy.DIRECTORY)
        if pid != SERVER:
            shutil.copyfile(keys_dir(workdir, SERVER) / deploy.CA_CERT, keys_dir(workdir, pid) / deploy.CA_CERT)


def merge_transcripts(workdir: Path, pids: list[str], out: Path) -> None:
    """Merge the parties' transcripts in causal order (logical clock, then party, then index).

    A party killed mid-run left no transcript: what it sent before dying is missing from the
    merge (its bytes are in the server's received count only as far as the server's own
    transcript records them, i.e. not at all); tests of dropouts read contributors instead.
    """
    rows = []
    for order, pid in enumerate(pids):
        path, clocks_path = out_file(workdir, pid, "transcript.jsonl"), out_file(workdir, pid, "clocks.json")
        if not path.exists():
            continue
        lines = path.read_text().splitlines()
        clocks = json.loads(clocks_path.read_text())
        if len(clocks) != len(lines):
            raise ProtocolError(f"{pid}'s transcript and clocks disagree ({len(lines)} vs {len(clocks)})")
        rows += [(clock, order, i, line) for i, (clock, line) in enumerate(zip(clocks, lines))]
    rows.sort(key=lambda row: row[:3])
    out.write_text("".join(line + "\n" for *_, line in rows))


def party_argv(workdir: Path, pid: str, role: str, address: str) -> list[str]:
    """``securefg party``'s command line for ``pid`` in the launcher's work folder (checkpoint
    and resume settings from the launcher's ``local.json``: they are each site's, not the run file's)."""
    local = json.loads((workdir / "local.json").read_text()) if (workdir / "local.json").exists() else {}
    extra = [*(["--checkpoint-every", str(local["checkpoint_every"])] if local.get("checkpoint_every") else []),
             *(["--resume"] if local.get("resume") else [])]
    return ["party", "--role", role, "--id", pid, "--server", address, "--config", str(workdir / "run.toml"),
            "--keys", str(keys_dir(workdir, pid)), "--out", str(workdir / "parties"), "--connect-timeout", "300",
            *extra]


def party_namespace(workdir: Path, pid: str, role: str, address: str) -> Any:
    """The parsed options a fresh ``securefg party`` process would get (for a forked party)."""
    import argparse

    from securefg.integrations.flower.party import add_party_options

    p = argparse.ArgumentParser(prog="securefg party")
    add_party_options(p)
    return p.parse_args(party_argv(workdir, pid, role, address)[1:])


def fork_parties(method: Any) -> bool:
    """Whether the single-host launcher forks its parties from one start-up process
    (:mod:`~securefg.integrations.flower.forked`: CPU runs on a system with ``fork``, unless
    ``SECUREFG_FLOWER_START=spawn``) rather than starting one fresh interpreter per party."""
    if os.environ.get("SECUREFG_FLOWER_START", "fork") == "spawn" or not hasattr(os, "fork"):
        return False
    return getattr(method.config.device, "type", "cpu") == "cpu"


class FlowerProcesses:
    """The party processes of one run (started by :meth:`start`, reaped by :meth:`wait`).

    Args:
        workdir (Path): The provisioned work folder.
        clients (int): Number of client processes.
        nice (int): ``nice`` increment of the parties. (default: ``0``)
        helpers (tuple[str, ...]): Helper parties with their own process, e.g. ``("keyholder",)``.
            (default: none)
    """

    def __init__(self, workdir: Path, clients: int, *, nice: int = 0, helpers: tuple[str, ...] = ()) -> None:
        self.workdir, self.clients, self.nice, self.helpers = workdir, clients, nice, helpers
        self.address = f"127.0.0.1:{free_port()}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _spawn(self, pid: str, role: str) -> None:
        log = (self.workdir / "logs" / (pid.replace("/", "_") + ".log")).open("wb")
        cmd = [sys.executable, "-m", "securefg", *party_argv(self.workdir, pid, role, self.address)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [os.environ.get("PYTHONPATH", ""), *sys.path] if p),
               "GRPC_ENABLE_FORK_SUPPORT": "0",
               # one party, one thread: N+1 processes each with a thread pool oversubscribe the cores
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        self.procs[pid] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                           preexec_fn=(lambda: os.nice(self.nice)) if self.nice else None)  # noqa: PLW1509 -- only os.nice, async-signal-safe

    def start(self) -> None:
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self._spawn(SERVER, "server")
        for pid in [*self.helpers, *(client_id(k) for k in range(self.clients))]:
            self._spawn(pid, "client" if is_client(pid) else "helper")

    def kill(self, pid: str) -> None:
        """SIGKILL one party's process (how tests make a client drop out mid-round)."""
        self.procs[pid].send_signal(signal.SIGKILL)

    def wait(self, timeout: float) -> dict[str, int]:
        """Wait for the server, then the clients; kill whatever is left. Returns exit codes."""
        deadline = time.monotonic() + timeout
        try:
            self.procs[SERVER].wait(timeout=max(0.01, deadline - time.monotonic()))
            for pid, p in self.procs.items():
                if pid != SERVER:
                    p.wait(timeout=max(0.01, min(30.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            pass
        finally:
            for p in self.procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return {pid: int(p.returncode) for pid, p in self.procs.items()}

    def log_tail(self, pid: str, chars: int = 3000) -> str:
        path = self.workdir / "logs" / (pid.replace("/", "_") + ".log")
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def read_measurements(work: Path, method: Any, fed: Any, server_view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The experimenter's history: every party's per-round measurement files, combined by the method."""
    import torch

    from securefg.federation.program.driver import MeasurementLog

    log = MeasurementLog()
    rounds = [int(v["round"]) for v in server_view]
    for pid in [SERVER, *fed.client_ids]:
        for r in rounds:
            path = out_file(work, pid, f"measure.{r}.pt")
            if path.exists():
                log.record(pid, r, torch.load(path, weights_only=True))
    return log.history(method, fed.client_ids, rounds)


def read_private_ledgers(work: Path, fed: Any) -> None:
    """Each party's DP ledger into the experimenter's stand-in for it (for the privacy report)."""
    import torch

    from securefg.protocol.dp.accountant import STATE_KEY, PrivacyAccountant

    for pid, party in fed.parties.items():
        path = out_file(work, pid, "accountant.pt")
        if path.exists():
            acc = PrivacyAccountant()
            acc.load_state_dict(torch.load(path, weights_only=True))
            party.state[STATE_KEY] = acc


def run_flower_experiment(cfg: Any, *, workdir: Path | None = None, timeout: float = 3600.0,
                          nice: int = 0, on_start: Any = None) -> dict[str, Any]:
    """Run ``cfg`` with every party in its own process over Flower; same result contract.

    Args:
        on_start (Callable[[FlowerProcesses | ForkedParties], None], optional): Called once the
            parties run (tests use it to kill a client mid-round).
    """
    require_flwr()
    from securefg.experiment import build_method, build_result, seed_everything, write_result
    from securefg.federation.federation import Federation
    t_start = time.perf_counter()
    seed_everything(cfg.seed)
    cfg, method, stack, data_info = build_method(cfg)
    if not type(method).distributable:
        raise ConfigError(f"method {method.name!r} keeps every party's data in one place (a one-owner baseline); "
                          "it runs with --backend inprocess only")
    n = method.num_clients
    helpers = tuple(method.extra_parties)
    keep = bool(cfg.out) and (cfg.resume or cfg.checkpoint_every > 0)  # checkpoints outlive this call
    if workdir is None and keep:
        workdir = Path(str(cfg.out)) / "flower"
    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix="securefg-flower-")) if workdir is None else Path(workdir)
    if cfg.resume and not any((work / "parties").glob("*.checkpoint.pt")):
        raise CheckpointError(f"no checkpoint to resume from in {work / 'parties'} (run with --checkpoint-every first)")
    provision(work, replace(cfg, progress=False), n, helpers)
    # the setting each party reads (resume and checkpoints are each site's own, not the run file's)
    (work / "local.json").write_text(json.dumps({"resume": cfg.resume, "checkpoint_every": cfg.checkpoint_every}))
    procs: Any
    if fork_parties(method):
        from securefg.integrations.flower.forked import ForkedParties, can_fork_here

        procs = ForkedParties(work, n, address=f"127.0.0.1:{free_port()}", helpers=helpers, nice=nice,
                              parts=(cfg, method, stack) if can_fork_here() else None)
    else:
        procs = FlowerProcesses(work, n, nice=nice, helpers=helpers)
    procs.start()
    try:
        if on_start is not None:
            on_start(procs)
    except BaseException:
        procs.wait(0)  # reap every party before the error leaves
        raise
    codes = procs.wait(timeout)
    server_out = out_file(work, SERVER, "json")
    if codes[SERVER] != 0 or not server_out.exists():
        raise ProtocolError(f"the Flower server process failed (exit {codes[SERVER]}):\n{procs.log_tail(SERVER)}")
    server = json.loads(server_out.read_text())

    fed = Federation(n, stack, seed=cfg.seed, extra_parties=helpers)
    merged = work / "transcript.jsonl"
    merge_transcripts(work, [SERVER, *fed.client_ids, *helpers], merged)
    load_jsonl(merged, fed.transcript)
    method.observe_run(fed)

    history = read_measurements(work, method, fed, server["server_view"])
    read_private_ledgers(work, fed)
    result = build_result(cfg, stack, fed, method.summarize(history), history, data_info,
                          wall=time.perf_counter() - t_start, train_seconds=server["train_seconds"],
                          extra=dict(getattr(method, "report", dict)()))
    result["patience"] = method.config.patience
    result["rounds_run"] = len(history)
    if server.get("stopped_early") is not None:
        result["stopped_early"] = server["stopped_early"]
    result["device"] = str(method.config.device)
    result["backend"] = "flower"
    result["flower"] = {
        "processes": {pid: code for pid, code in codes.items()},
        "dropped": server["dropped"],
        "server_view": server["server_view"],
        "framing_bytes": server["framing_bytes"],
        "grpc_payload_bytes": server["flower_bytes_sent"] + server["flower_bytes_received"],
        "workdir": None if own_tmp else str(work),
    }
    if cfg.out:
        write_result(Path(cfg.out), result)
    if own_tmp:  # it holds every party's private channel key
        shutil.rmtree(work, ignore_errors=True)
    return result
