"""Run a Flower ServerApp main and a ClientApp with one OS process per client, on loopback.

``run_local(main, "path/to/app.py:client_app", num_clients=5)``: the calling process hosts
Flower's gRPC fleet server and runs ``main(grid, context)`` against a
:class:`~securefg.integrations.flower.grid.BidiGrid`; each client process loads the
``ClientApp`` by reference and serves it through Flower's client loop, with
``node_config = {"partition-id": k, "num-partitions": n}`` as Flower's simulation sets it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def load_ref(ref: str) -> Any:
    """``"pkg.module:attr"`` or ``"path/to/file.py:attr"`` -> the object."""
    target, _, attr = ref.partition(":")
    if not attr:
        raise ValueError(f"app reference {ref!r} must look like 'module:attr' or 'file.py:attr'")
    if target.endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {target}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, attr)


def run_local(main: Callable[[Any, Any], Any], client_app_ref: str, *, num_clients: int,
              run_config: dict[str, Any] | None = None, connect_timeout: float = 300.0) -> Any:
    """Start the clients, run ``main(grid, context)`` here, shut the clients down; return its result."""
    from flwr.app import Context, RecordDict
    from flwr.common import ReconnectIns
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.server import reconnect_clients
    from flwr.server.superlink.fleet.grpc_bidi.grpc_server import start_grpc_server

    from securefg.integrations.flower.grid import BidiGrid
    from securefg.integrations.flower.launcher import free_port

    address = f"127.0.0.1:{free_port()}"
    cm = SimpleClientManager()
    server = start_grpc_server(client_manager=cm, server_address=address)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [os.environ.get("PYTHONPATH", ""), *sys.path] if p)}
    procs = [subprocess.Popen([sys.executable, "-m", "securefg.integrations.flower.local", "--app", client_app_ref,
                               "--address", address, "--index", str(k), "--num", str(num_clients)], env=env)
             for k in range(num_clients)]
    grid = BidiGrid(cm)
    try:
        if not cm.wait_for(num_clients, timeout=int(connect_timeout)):
            raise TimeoutError(f"only {cm.num_available()} of {num_clients} clients connected")
        context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config or {})
        return main(grid, context)
    finally:
        reconnect_clients([(p, ReconnectIns(seconds=None)) for p in cm.all().values()], max_workers=None, timeout=10)
        grid.close()
        server.stop(grace=1)
        deadline = time.monotonic() + 30
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()


def _client(app_ref: str, address: str, index: int, num: int) -> None:
    from flwr.app import Context, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.compat.client.app import start_client_internal

    from securefg.integrations.flower.grid import TunnelClient

    user_app = load_ref(app_ref)
    own = Context(run_id=1, node_id=index + 1, node_config={"partition-id": index, "num-partitions": num},
                  state=RecordDict(), run_config={})

    def client_fn(context: Context):  # type: ignore[no-untyped-def]
        return TunnelClient(user_app, own).to_client()

    app = ClientApp(client_fn=client_fn)
    start_client_internal(server_address=address, node_config={}, load_client_app_fn=lambda *_: app,
                          insecure=True, max_wait_time=60)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--address", required=True)
    ap.add_argument("--index", type=int, required=True)
    ap.add_argument("--num", type=int, required=True)
    a = ap.parse_args()
    _client(a.app, a.address, a.index, a.num)
