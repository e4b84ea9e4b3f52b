"""securefg's CKKS aggregate embedded in a home-made FL stack, the secret key held by a client.

``python examples/embed_ckks.py [--clients 4] [--drop -1] [--stack fedavg_ckks]``

One server process and ``--clients`` client processes talk over plain TCP (asyncio streams, a u32
length before each message); no securefg transport and no Flower. ``client/0`` is also the key
holder (:class:`securefg.api.CKKSKeyHolder`): it makes the CKKS keys and hands the server its
*public* context, which the server passes on to the other clients (:class:`securefg.api.CKKSClient`).
Each client trains a small MLP for one FedAvg round and uploads ``Enc(n_k * update_k || n_k)``; the
server (:class:`securefg.api.CKKSServer`, whose context refuses a secret key) adds the ciphertexts
and asks the key holder to decrypt only the sum, which comes back flooded with noise (against key
recovery by the server). Client ``--drop`` (not 0) crashes before it uploads: the sum is over the
others. The key holder sees the sum, as every client sees the averaged model anyway.

To check the result each client also hands its plaintext input to the parent process (never to
the server); the parent asserts the released sum is within the CKKS tolerance of the plaintext sum:
``|error| <= 1e-6 * max|sum| + 6 * flood_std`` per element (docs/embedding.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import numpy as np
import torch
from home_made_stack import HOST, initial_vector, local_update, maybe_recv, recv, run_parties, send

from securefg.api import CKKSClient, CKKSConfig, CKKSKeyHolder, CKKSServer

TAG = "fedavg/update"
HOLDER = "client/0"
STAGE_TIMEOUT = 60.0
"""Seconds the server waits for a step's replies; a client silent that long has dropped out."""


# --------------------------------------------------------------------------- the server
async def serve(clients: int, stack: str, port_out: Any, results: Any) -> None:
    config = CKKSConfig.from_stack(stack, TAG)
    conns: dict[str, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
    ready = asyncio.Event()

    async def hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns[(await recv(reader)).decode()] = (reader, writer)
        if len(conns) == clients:
            ready.set()

    listener = await asyncio.start_server(hello, HOST, 0)
    port_out.send(listener.sockets[0].getsockname()[1])
    await asyncio.wait_for(ready.wait(), STAGE_TIMEOUT)
    public = await recv(conns[HOLDER][0])  # the key holder's public context (no secret key in it)
    server = CKKSServer(config, public_context=public)
    model = initial_vector()
    for pid, (_, writer) in conns.items():
        await send(writer, model.numpy().tobytes())
        if pid != HOLDER:
            await send(writer, public)

    length = model.numel() + 1
    order = sorted(conns)
    got = await asyncio.gather(*(maybe_recv(conns[pid][0], STAGE_TIMEOUT) for pid in order))
    uploads = {pid: up for pid, up in zip(order, got) if up is not None}
    request = server.sum(uploads, length=length)  # Enc(sum): the server cannot read it
    await send(conns[HOLDER][1], request)
    total = server.read_sum(await recv(conns[HOLDER][0]), length=length)
    new_model = model + total[:-1] / total[-1]
    for pid in server.contributors:
        await send(conns[pid][1], new_model.numpy().tobytes())
    for _, writer in conns.values():
        writer.close()
    listener.close()
    results.put(("server", {"contributors": list(server.contributors),
                            "dropped": sorted(set(conns) - set(server.contributors)), "total": total.tolist(),
                            "flood_std": float(config.params["flood_std"]), "public_context_bytes": len(public),
                            "server_holds_public_context_only": server.is_public()}))


# --------------------------------------------------------------------------- a client
async def client(k: int, port: int, stack: str, drop: bool, results: Any) -> None:
    config = CKKSConfig.from_stack(stack, TAG)
    pid = f"client/{k}"
    reader, writer = await asyncio.open_connection(HOST, port)
    await send(writer, pid.encode())
    holder = CKKSKeyHolder(config, pid=pid) if pid == HOLDER else None
    if holder is not None:
        await send(writer, holder.public_context())
    model = torch.from_numpy(np.frombuffer(await recv(reader), dtype=np.float64).copy())
    party = holder if holder is not None else CKKSClient(config, public_context=await recv(reader))
    update, n = local_update(k, model)
    vector = torch.cat([update * n, torch.tensor([float(n)], dtype=torch.float64)])
    results.put(("input", pid, None if drop else vector.tolist()))  # the parent's check only
    if drop:
        writer.close()  # crash before uploading
        return
    await send(writer, party.encrypt(vector))
    if holder is not None:  # decrypt the sum, and only the sum
        await send(writer, holder.release_sum(await recv(reader), length=vector.numel()))
    await recv(reader)  # the new global model
    writer.close()


# --------------------------------------------------------------------------- the check
def check(inputs: dict[str, list[float] | None], server: dict[str, Any]) -> dict[str, Any]:
    """The released sum against the plaintext sum of the contributors, within the CKKS tolerance."""
    plain = np.sum([inputs[p] for p in server["contributors"]], axis=0)
    err = np.abs(np.array(server["total"]) - plain)
    tolerance = 1e-6 * float(np.abs(plain).max()) + 6 * server["flood_std"]
    return {"max_abs_error": float(err.max()), "tolerance": tolerance, "within_tolerance": bool(err.max() <= tolerance),
            "plaintext_total": plain.tolist()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--drop", type=int, default=-1, help="client index (not 0) that crashes before uploading")
    p.add_argument("--stack", default="fedavg_ckks", help="stack file or shipped name binding " + TAG)
    p.add_argument("--json", default=None, help="write the outcome here")
    args = p.parse_args(argv)
    if args.drop == 0:
        p.error("client 0 holds the key; drop another one")

    inputs, server = run_parties(serve, client, clients=args.clients, stack=args.stack, drop=args.drop)
    outcome = {**server, **check(inputs, server), "clients": args.clients, "stack": args.stack}
    print(f"clients: {args.clients}; key holder: {HOLDER}; in the sum: {', '.join(server['contributors'])}; "
          f"dropped: {', '.join(server['dropped']) or 'none'}")
    print(f"server holds a public context only: {server['server_holds_public_context_only']} "
          f"({server['public_context_bytes'] / 1e6:.1f} MB)")
    print(f"max |released sum - plaintext sum| = {outcome['max_abs_error']:.3g} "
          f"(tolerance {outcome['tolerance']:.3g}): {'ok' if outcome['within_tolerance'] else 'EXCEEDED'}")
    print(f"examples in the round: {server['total'][-1]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(outcome, f, indent=1)
    return 0 if outcome["within_tolerance"] else 1


if __name__ == "__main__":
    sys.exit(main())
