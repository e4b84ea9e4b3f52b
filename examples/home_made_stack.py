"""The "home-made FL stack" the embedding examples drive securefg's protocols from.

Nothing here is securefg: plain TCP between processes (asyncio streams, a u32 length before each
message), a toy FedAvg task (a small MLP per client on its own synthetic data) and the launcher that
starts one server process and the client processes and collects what they report to the parent.
``examples/embed_secure_sum.py`` and ``examples/embed_ckks.py`` put securefg's bytes on top of it.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

HOST = "127.0.0.1"
MAX_MESSAGE = 64 << 20


# --------------------------------------------------------------------------- framing
async def send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(struct.pack("<I", len(data)) + data)
    await writer.drain()


async def recv(reader: asyncio.StreamReader) -> bytes:
    (n,) = struct.unpack("<I", await reader.readexactly(4))
    if n > MAX_MESSAGE:
        raise ValueError(f"a message of {n} bytes is beyond this stack's limit")
    return await reader.readexactly(n)


async def maybe_recv(reader: asyncio.StreamReader, timeout: float) -> bytes | None:
    """A message, or ``None`` when the peer closed its socket or stayed silent ``timeout`` s (a dropout)."""
    try:
        return await asyncio.wait_for(recv(reader), timeout)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
        return None


# --------------------------------------------------------------------------- the FL task
def make_model() -> nn.Module:
    torch.manual_seed(0)  # every party builds the same initial model
    return nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2)).double()


def initial_vector() -> torch.Tensor:
    """The initial global model as one float64 vector."""
    return parameters_to_vector(make_model().parameters()).detach()


def local_update(k: int, global_vec: torch.Tensor, *, epochs: int = 5) -> tuple[torch.Tensor, int]:
    """Client ``k``: train on its own data from the global model; its update and example count."""
    g = torch.Generator().manual_seed(1000 + k)
    n = 40 + 10 * k
    x = torch.randn(n, 8, generator=g, dtype=torch.float64)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    model = make_model()
    vector_to_parameters(global_vec.clone(), model.parameters())  # (it would alias global_vec)
    for _ in range(epochs):  # plain gradient descent (torch.optim would import torch._dynamo: seconds)
        model.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            for w in model.parameters():
                w -= 0.1 * w.grad
    return parameters_to_vector(model.parameters()).detach() - global_vec, n


# --------------------------------------------------------------------------- processes
def _run(coroutine: Callable[..., Awaitable[None]], *args: Any) -> None:
    asyncio.run(coroutine(*args))  # type: ignore[arg-type]


def run_parties(serve: Callable[..., Awaitable[None]], client: Callable[..., Awaitable[None]], *, clients: int,
                stack: str, drop: int, timeout: float = 180.0) -> tuple[dict[str, Any], dict[str, Any]]:
    """One server process ``serve(clients, stack, port_out, results)`` and ``clients`` client processes
    ``client(k, port, stack, k == drop, results)``; returns (each client's reported input, the server's report).

    Parties report to the parent through ``results``: ``("input", pid, vector or None)`` from a client
    (for the parent's check only, never to the server) and ``("server", outcome)`` from the server.
    """
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["securefg.api", "torch"])  # import once, fork per party
    results = ctx.Queue()
    port_in, port_out = ctx.Pipe(duplex=False)
    procs = [ctx.Process(target=_run, args=(serve, clients, stack, port_out, results))]
    procs[0].start()
    port = port_in.recv()
    procs += [ctx.Process(target=_run, args=(client, k, port, stack, k == drop, results)) for k in range(clients)]
    for proc in procs[1:]:
        proc.start()
    inputs: dict[str, Any] = {}
    server: dict[str, Any] = {}
    while not server or len(inputs) < clients:
        item = results.get(timeout=timeout)
        if item[0] == "input":
            inputs[item[1]] = item[2]
        else:
            server = item[1]
    for proc in procs:
        proc.join(timeout=60)
    return inputs, server
