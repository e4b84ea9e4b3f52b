"""securefg's secure sum embedded in a home-made FL stack: processes, asyncio streams, bytes only.

``python examples/embed_secure_sum.py [--clients 5] [--drop 3] [--stack fedavg_secure_sum]``

One server process and ``--clients`` client processes talk over plain TCP (asyncio streams, a u32
length before each message); no securefg transport and no Flower. Each client trains a small MLP
on its own data for one FedAvg round and hands ``n_k * update_k || n_k`` to a
:class:`securefg.api.SecureSumClient`; the server drives a :class:`securefg.api.SecureSumServer`
stage by stage and only ever learns the sum over the clients that survived, from which it takes
the weighted mean update. Client ``--drop`` crashes (closes its socket) after it sent its key
shares, before its masked input: the server counts it as a dropout, the others reveal its mask-key
shares, and the sum over the survivors still comes out.

To check the result, each client also hands its plaintext input to the parent process (never to
the server): the parent asserts that the server's sum equals the plaintext sum over the survivors
exactly in the ring (2^bits) and within the fixed-point error bound as floats.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import numpy as np
import torch
from home_made_stack import HOST, initial_vector, local_update, maybe_recv, recv, run_parties, send

from securefg.api import SecureSumClient, SecureSumConfig, SecureSumServer

TAG = "fedavg/update"
STAGE_TIMEOUT = 30.0
"""Seconds the server waits for a stage's replies; a client silent that long has dropped out."""


# --------------------------------------------------------------------------- the server
async def serve(clients: int, stack: str, port_out: Any, results: Any) -> None:
    config = SecureSumConfig.from_stack(stack, TAG)
    conns: dict[str, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
    ready = asyncio.Event()

    async def hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns[(await recv(reader)).decode()] = (reader, writer)
        if len(conns) == clients:
            ready.set()

    listener = await asyncio.start_server(hello, HOST, 0)
    port_out.send(listener.sockets[0].getsockname()[1])
    await asyncio.wait_for(ready.wait(), STAGE_TIMEOUT)
    session = os.urandom(16)  # one per run, shared by every party
    model = initial_vector()
    for _, writer in conns.values():
        await send(writer, session + model.numpy().tobytes())

    server = SecureSumServer(config, clients=sorted(conns), length=model.numel() + 1, session=session, round=0,
                             tag=TAG)
    out = server.start()
    while not server.done:
        for pid, message in out.items():
            await send(conns[pid][1], message)
        replies = await asyncio.gather(*(maybe_recv(conns[pid][0], STAGE_TIMEOUT) for pid in out))
        out = server.receive({pid: r for pid, r in zip(out, replies) if r is not None})
    result = server.result
    assert result is not None
    mean_update = result.total[:-1] / result.total[-1]  # sum_k n_k u_k / sum_k n_k over the survivors
    new_model = model + mean_update
    for pid in result.contributors:
        await send(conns[pid][1], new_model.numpy().tobytes())
    for _, writer in conns.values():
        writer.close()
    listener.close()
    results.put(("server", {
        "contributors": list(result.contributors), "drops": {p: r.value for p, r in result.drops.items()},
        "total": result.total.tolist(), "ring_total": [int(w) for w in result.ring_total],
        "ring_bits": result.ring_bits, "error_bound": result.error_bound,
        "degree": result.degree, "threshold": result.threshold,
    }))


# --------------------------------------------------------------------------- a client
async def client(k: int, port: int, stack: str, drop: bool, results: Any) -> None:
    config = SecureSumConfig.from_stack(stack, TAG)
    pid = f"client/{k}"
    reader, writer = await asyncio.open_connection(HOST, port)
    await send(writer, pid.encode())
    start = await recv(reader)
    session, model = start[:16], torch.from_numpy(np.frombuffer(start[16:], dtype=np.float64).copy())
    update, n = local_update(k, model)
    vector = torch.cat([update * n, torch.tensor([float(n)], dtype=torch.float64)])
    results.put(("input", pid, vector.tolist()))  # for the parent's check only; the server never sees it
    party = SecureSumClient(config, pid=pid, vector=vector, session=session, round=0, tag=TAG)
    while not party.done:
        message = await recv(reader)
        if drop and party.stage == "secure_sum/masked_input":
            writer.close()  # crash after sending the key shares, before the masked input
            return
        await send(writer, party.handle(message))
    await recv(reader)  # the new global model
    writer.close()


# --------------------------------------------------------------------------- the check
def check(stack: str, clients: int, inputs: dict[str, list[float]], server: dict[str, Any]) -> dict[str, Any]:
    """The server's sum against the plaintext sum over the survivors: exact in the ring, and within
    the fixed-point error bound as floats."""
    config = SecureSumConfig.from_stack(stack, TAG)
    survivors = server["contributors"]
    mask = (1 << server["ring_bits"]) - 1
    ring = [0] * len(server["ring_total"])
    for pid in survivors:
        for i, w in enumerate(config.quantize(np.array(inputs[pid]), clients=clients)):
            ring[i] = (ring[i] + int(w)) & mask
    plain = np.sum([inputs[p] for p in survivors], axis=0)
    err = float(np.abs(np.array(server["total"]) - plain).max())
    return {"ring_exact": ring == server["ring_total"], "max_abs_error": err,
            "within_error_bound": err <= server["error_bound"], "plaintext_total": plain.tolist()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=5)
    p.add_argument("--drop", type=int, default=3, help="client index that crashes mid-call (-1: none)")
    p.add_argument("--stack", default="fedavg_secure_sum", help="stack file or shipped name binding " + TAG)
    p.add_argument("--json", default=None, help="write the outcome here")
    args = p.parse_args(argv)

    inputs, server = run_parties(serve, client, clients=args.clients, stack=args.stack, drop=args.drop)
    outcome = {**server, **check(args.stack, args.clients, inputs, server), "clients": args.clients,
               "stack": args.stack}
    print(f"clients: {args.clients}; in the sum: {', '.join(server['contributors'])}; dropped: "
          + (", ".join(f"{p} ({r})" for p, r in server["drops"].items()) or "none"))
    print(f"ring 2^{server['ring_bits']}, degree {server['degree']}, threshold {server['threshold']}")
    print(f"sum over the survivors == plaintext sum, exactly in the ring: {outcome['ring_exact']}")
    print(f"max |float sum - plaintext sum| = {outcome['max_abs_error']:.3g} "
          f"(error bound {server['error_bound']:.3g}): {'ok' if outcome['within_error_bound'] else 'EXCEEDED'}")
    print(f"examples in the round: {server['total'][-1]:.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(outcome, f, indent=1)
    return 0 if outcome["ring_exact"] and outcome["within_error_bound"] else 1


if __name__ == "__main__":
    sys.exit(main())
