"""A federation across hosts (issue 37): every party started by its own command, from its own folders.

The walk-through of docs/flower.md ("Deploy on several hosts"), run on loopback: the coordinator
writes the run file, each site makes its own key pair, the coordinator builds the pinned
directory from the public halves, the server's site makes the TLS files; then the server and
three clients each run ``securefg party`` from a separate working folder with a separate key
folder, over TLS. Nothing but the public files is copied between the sites' folders.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from securefg.experiment import RunConfig, run_experiment
from securefg.federation.runner import RoundRunner

REPO = Path(__file__).resolve().parents[2]
# the small CSBM task of test_flower_backend.py, under SecAgg+ alone (FedAvg's default stack adds a
# keyholder site; docs/flower.md's walkthrough pins this stack too)
RUN_OPTIONS = ["--method", "fedavg", "--dataset", "csbm", "--clients", "3", "--rounds", "2", "--seed", "5",
               "--hidden", "8", "--local-epochs", "10", "--lr", "0.05", "--protocol", "fedavg_secure_sum"]
CLIENTS = ["client/0", "client/1", "client/2"]


def securefg(*args):
    """``securefg ARGS`` as the docs type it (this interpreter, this checkout)."""
    return [sys.executable, "-m", "securefg", *map(str, args)]


ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p)}


def sh(*args, cwd):
    done = subprocess.run(securefg(*args), cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def start(*args, cwd):
    return subprocess.Popen(securefg(*args), cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def site_name(pid):
    return pid.replace("/", "")


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """The docs' set-up steps; returns the root holding coordinator/, server/, client0/ ..."""
    root = tmp_path_factory.mktemp("hosts")
    for name in ["coordinator", "server", *map(site_name, CLIENTS)]:
        (root / name).mkdir()
    # coordinator: the run file (options and a fresh session id)
    sh("config", "--out", "run.toml", *RUN_OPTIONS, cwd=root / "coordinator")
    # each site: its own key pair; the server's site also its TLS files
    sh("keys", "new", "--id", "server", "--out", "keys", cwd=root / "server")
    sh("certs", "--out", "keys", "--host", "127.0.0.1", cwd=root / "server")
    for pid in CLIENTS:
        sh("keys", "new", "--id", pid, "--out", "keys", cwd=root / site_name(pid))
    # the sites hand in public.json; the coordinator pins them in one directory
    publics = [f"../{name}/keys/public.json" for name in ["server", *map(site_name, CLIENTS)]]
    sh("keys", "directory", "--out", "directory.json", *publics, cwd=root / "coordinator")
    # every site gets run.toml and directory.json; clients also the server's ca.pem
    for name in ["server", *map(site_name, CLIENTS)]:
        shutil.copy(root / "coordinator" / "run.toml", root / name / "run.toml")
        shutil.copy(root / "coordinator" / "directory.json", root / name / "keys" / "directory.json")
        if name != "server":
            shutil.copy(root / "server" / "keys" / "ca.pem", root / name / "keys" / "ca.pem")
    return root


def test_server_and_clients_from_their_own_folders_over_tls_match_the_in_process_run(sites, monkeypatch):
    assert oct((sites / "client0" / "keys" / "private.key").stat().st_mode & 0o777) == "0o600"
    assert oct((sites / "server" / "keys" / "server.key").stat().st_mode & 0o777) == "0o600"
    assert json.loads((sites / "client0" / "keys" / "public.json").read_text())["pid"] == "client/0"
    address = f"127.0.0.1:{free_port()}"
    procs = {"server": start("party", "--role", "server", "--server", address, "--config", "run.toml",
                             "--keys", "keys", "--out", "out", cwd=sites / "server")}
    for pid in CLIENTS:
        procs[pid] = start("party", "--role", "client", "--id", pid, "--server", address, "--config", "run.toml",
                           "--keys", "keys", "--out", "out", cwd=sites / site_name(pid))

    views, logs = [], {}
    run = RoundRunner.run

    def keep_view(self):
        outcome = run(self)
        views.append(outcome.server_view)
        return outcome

    try:
        # meanwhile, the same run in process, keeping what its server learned
        monkeypatch.setattr(RoundRunner, "run", keep_view)
        run_experiment(RunConfig(method="fedavg", dataset="csbm", clients=3, rounds=2, seed=5, hidden=8,
                                 local_epochs=10, lr=0.05, progress=False, protocol="fedavg_secure_sum"))
        for pid, p in procs.items():
            logs[pid] = p.communicate(timeout=240)[0]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    codes = {pid: p.returncode for pid, p in procs.items()}
    assert codes == {pid: 0 for pid in procs}, "\n".join(f"== {pid}\n{log[-3000:]}" for pid, log in logs.items())
    fl_view = json.loads((sites / "server" / "out" / "server.json").read_text())["server_view"]
    assert len(fl_view) == len(views[0]) == 2
    for fl, ip in zip(fl_view, views[0]):
        assert fl == pytest.approx(ip, abs=1e-12)
    # each party wrote only its own outputs, in its own folder
    for pid in ["server", *CLIENTS]:
        names = {p.name.split(".")[0] for p in (sites / site_name(pid) / "out").iterdir()}
        assert names == {pid.replace("/", "_")}


def test_a_client_whose_key_is_not_the_pinned_one_is_refused(sites, tmp_path):
    # a site that made a new key after the directory was built: it stops before connecting
    rogue = tmp_path / "rogue"
    rogue.mkdir()
    sh("keys", "new", "--id", "client/1", "--out", "keys", cwd=rogue)
    shutil.copy(sites / "client1" / "run.toml", rogue / "run.toml")
    shutil.copy(sites / "client1" / "keys" / "directory.json", rogue / "keys" / "directory.json")
    shutil.copy(sites / "client1" / "keys" / "ca.pem", rogue / "keys" / "ca.pem")
    done = subprocess.run(securefg("party", "--role", "client", "--id", "client/1", "--server", "127.0.0.1:9",
                                   "--config", "run.toml", "--keys", "keys"),
                          cwd=rogue, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "securefg: error: AuthenticationError: keys/directory.json: the pinned directory holds another key " \
           "for 'client/1'" in done.stderr

    # one that also doctored its copy of the directory gets as far as the server, which refuses it
    # (a one-client run, so the server starts the handshake as soon as this client connects)
    one = tmp_path / "one"
    for name in ("server", "rogue"):
        (one / name).mkdir(parents=True)
    # the run file is plain TOML: the coordinator edits a copy down to one client
    run = (sites / "coordinator" / "run.toml").read_text().replace("clients = 3", "clients = 1")
    for name in ("server", "rogue"):
        (one / name / "run.toml").write_text(run)
    shutil.copytree(sites / "server" / "keys", one / "server" / "keys")
    sh("keys", "directory", "--out", "keys/directory.json", sites / "server" / "keys" / "public.json",
       sites / "client0" / "keys" / "public.json", cwd=one / "server")
    sh("keys", "new", "--id", "client/0", "--out", "keys", cwd=one / "rogue")
    sh("keys", "directory", "--out", "keys/directory.json", sites / "server" / "keys" / "public.json",
       "keys/public.json", cwd=one / "rogue")
    shutil.copy(sites / "server" / "keys" / "ca.pem", one / "rogue" / "keys" / "ca.pem")
    address = f"127.0.0.1:{free_port()}"
    server = start("party", "--role", "server", "--server", address, "--config", "run.toml", "--keys", "keys",
                   "--out", "out", cwd=one / "server")
    client = start("party", "--role", "client", "--id", "client/0", "--server", address, "--config", "run.toml",
                   "--keys", "keys", "--out", "out", cwd=one / "rogue")
    try:
        server_log, client_log = server.communicate(timeout=180)[0], client.communicate(timeout=60)[0]
    finally:
        for p in (server, client):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert (server.returncode, client.returncode) == (2, 2), server_log[-3000:] + client_log[-3000:]
    assert "securefg: error: AuthenticationError: 'client/0' presented channel key" in server_log
    assert "but keys/directory.json pins" in server_log
    assert "securefg: error: AuthenticationError: the server refused 'client/0'" in client_log


def test_a_client_pointed_at_a_closed_port_stops_with_a_clear_error(sites):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    done = subprocess.run(securefg("party", "--role", "client", "--id", "client/2", "--server", address,
                                   "--config", "run.toml", "--keys", "keys", "--out", "out",
                                   "--connect-timeout", "3"),
                          cwd=sites / "client2", env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"securefg: error: ServerUnreachableError: no securefg server answered at {address} within 3 s" \
           in done.stderr
    assert time.monotonic() - t0 < 60  # the 3 s and a start-up that loads neither torch nor the task


# ---------------------------------------------------------------- the files, in process (fast)
def test_run_file_round_trips_the_configuration_and_names_itself_in_errors(tmp_path):
    from securefg.errors import ConfigError
    from securefg.integrations.flower.deploy import read_run_file, write_run_file

    cfg = RunConfig(method="fedavg", dataset="csbm", clients=3, rounds=2, seed=5, hidden=8, local_epochs=10, lr=0.05,
                    split=(0.2, 0.4, 0.4), options={"patience": 0, "mode": "a b", "flag": True}, out="x")
    session = write_run_file(tmp_path / "run.toml", cfg)
    back, got = read_run_file(tmp_path / "run.toml")
    assert got == session and len(session) == 16
    assert back == RunConfig(**{**cfg.__dict__, "out": None, "progress": False})
    (tmp_path / "bad.toml").write_text("client = 3\n" + (tmp_path / "run.toml").read_text())
    with pytest.raises(ConfigError, match=r"bad\.toml: unknown keys \['client'\]"):
        read_run_file(tmp_path / "bad.toml")
    (tmp_path / "nosession.toml").write_text('method = "fedavg"\ndataset = "csbm"\n')
    with pytest.raises(ConfigError, match=r"nosession\.toml: needs session"):
        read_run_file(tmp_path / "nosession.toml")


def test_directory_and_certificates(tmp_path):
    from cryptography import x509

    from securefg.errors import ConfigError
    from securefg.integrations.flower.deploy import build_directory, load_identity, make_certs, new_keys

    a = new_keys("client/0", tmp_path / "a")
    b = new_keys("client/0", tmp_path / "b")
    with pytest.raises(ConfigError, match="two different keys for 'client/0'"):
        build_directory([a, b], tmp_path / "directory.json")
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        new_keys("client/0", tmp_path / "a")
    with pytest.raises(ConfigError, match="belongs to 'client/0', not 'client/1'"):
        load_identity(tmp_path / "a", "client/1")
    paths = make_certs(tmp_path / "tls", ["127.0.0.1", "fl.example.org"])
    cert = x509.load_pem_x509_certificate(paths["cert"].read_bytes())
    ca = x509.load_pem_x509_certificate(paths["ca"].read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["fl.example.org"]
    cert.verify_directly_issued_by(ca)
    assert oct(paths["key"].stat().st_mode & 0o777) == "0o600"
