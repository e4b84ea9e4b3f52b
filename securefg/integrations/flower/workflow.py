"""Server side of securefg protection for a plain Flower app: a FedAvg round whose updates only
ever reach the server as a securefg secure sum (SecAgg+ with dropouts; DP via the stack) or a
CKKS sum (``stack="fedavg_ckks"``: the lowest-numbered client holds the secret key and decrypts
only the flooded sum; the server adds ciphertexts).

In a ``ServerApp`` main, replacing the strategy's train/aggregate step::

    wf = SecureFedAvgWorkflow()                 # stack "fedavg_secure_sum", tag "fedavg/update"
    wf.setup(grid)                              # channel keys with every node (once)
    for r in range(rounds):
        arrays, n = wf.train_round(grid, arrays, round=r)

Each round sends Flower's own ``train`` message (``"arrays"`` + ``"config"``) plus a small
``"securefg"`` mark; the clients' :func:`~securefg.integrations.flower.mods.securefg_mod` turns
their train replies into secure-sum inputs, then the server runs the secure sum's stages as
``query.securefg`` steps and returns the weighted mean over the surviving clients (weights =
each client's ``num-examples``, summed inside the same protected sum). A node that does not
answer is a dropout; the sum is revealed only with at least the threshold of survivors.

Channel keys are exchanged in :meth:`setup` over Flower's connection (trust on first use;
run Flower with TLS and node authentication to pin them).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.serverapp.grid import Grid

from securefg.errors import ProtocolError
from securefg.federation.channel import ChannelIdentity
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.party_transport import PartyTransport
from securefg.federation.program.exchange import ServerExchange
from securefg.integrations.flower.mods import DIRECTORY, HELLO, MARK
from securefg.integrations.flower.records import MESSAGE_TYPE, Step, step_from_content, step_to_content
from securefg.integrations.flower.runtime import FlowerServerRuntime
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack


class SecureFedAvgWorkflow:
    """FedAvg rounds aggregated by securefg, for any Flower ``Grid``.

    Args:
        stack (str): A shipped protocol stack every party loads by name. (default: ``"fedavg_secure_sum"``)
        tag (str): The stack's tag for the update sum. (default: ``"fedavg/update"``)
    """

    def __init__(self, *, stack: str = "fedavg_secure_sum", tag: str = "fedavg/update") -> None:
        self.stack_name, self.tag = stack, tag
        self.stack = ProtocolStack.load(stack)
        self.stack.resolve(tag, ExchangeKind.AGGREGATE)  # fail now on an unbound tag
        self.rt: FlowerServerRuntime | None = None
        self.exchange: ServerExchange | None = None

    def setup(self, grid: Grid, node_ids: Iterable[int] | None = None) -> None:
        """Exchange channel keys with every node; node ``i`` (in sorted order) is ``client/i``."""
        nodes = sorted(node_ids if node_ids is not None else grid.get_node_ids())
        ident = ChannelIdentity(SERVER)
        session = os.urandom(16)
        pids = {client_id(k): n for k, n in enumerate(nodes)}
        msgs = [Message(step_to_content(Step(HELLO, info={"pid": pid, "session": session.hex(), "server_pk": ident.public_bytes.hex(),
                                          "stack": self.stack_name, "clients": len(pids)})),
                        dst_node_id=n, message_type=MESSAGE_TYPE) for pid, n in pids.items()]
        directory = {SERVER: ident.public_bytes}
        node_to_pid = {n: p for p, n in pids.items()}
        for rep in grid.send_and_receive(msgs):
            if rep.has_error():
                continue
            pk = step_from_content(rep.content).info.get("pk")
            if not isinstance(pk, str) or len(pk) != 64:
                raise ProtocolError(f"node {rep.metadata.src_node_id} sent no channel key")
            directory[node_to_pid[rep.metadata.src_node_id]] = bytes.fromhex(pk)
        transport = PartyTransport(ident, session=session, directory=directory)
        self.rt = FlowerServerRuntime(transport, Party(SERVER), grid=grid)
        self.rt.nodes = {p: n for p, n in pids.items() if p in directory}
        self.rt.peers = sorted(self.rt.nodes)
        self.exchange = ServerExchange(self.rt, self.stack, seed=int.from_bytes(os.urandom(8), "little"))
        # every client learns the others' channel keys: a CKKS key holder (the lowest client)
        # sends them its public context through the server, sealed end to end
        peers = {f"pk.{p}": k.hex() for p, k in directory.items() if p != SERVER}
        self.rt.step(self.rt.live, action=DIRECTORY, round=-1, info=peers)

    def train_round(self, grid: Grid, arrays: ArrayRecord, *, round: int,
                    config: ConfigRecord | None = None) -> tuple[ArrayRecord, int]:
        """One FedAvg round: returns the weighted mean arrays and how many clients are in it."""
        rt = self.rt
        if rt is None:
            raise ProtocolError("call SecureFedAvgWorkflow.setup(grid) before train_round")
        clients = rt.live
        node_to_pid = {n: p for p, n in rt.nodes.items()}
        msgs = []
        for pid in clients:
            content = RecordDict({"arrays": arrays, "config": config or ConfigRecord(),
                                  MARK: ConfigRecord({"tag": self.tag, "round": round})})
            msgs.append(Message(content, dst_node_id=rt.nodes[pid], message_type="train"))
        trained = []
        for rep in grid.send_and_receive(msgs):
            pid = node_to_pid[rep.metadata.src_node_id]
            if rep.has_error():
                rt.dropped.setdefault(pid, f"train r{round}: {rep.error.reason}")
                continue
            if rep.content.array_records:
                raise ProtocolError(f"{pid} returned its arrays in the clear: is securefg_mod installed?")
            mark = rep.content.config_records.get(MARK)
            layout = mark.get("layout") if mark is not None else None
            if not isinstance(layout, str):
                raise ProtocolError(f"{pid}'s train reply lacks the layout of its input: is securefg_mod installed?")
            rt.layouts.setdefault((self.tag, round), {})[pid] = layout
            trained.append(pid)
        assert self.exchange is not None
        self.exchange.round = round
        mean = self.exchange.aggregate(self.tag, clients=trained)
        dtypes = {k: v.numpy().dtype for k, v in arrays.items()}
        out = ArrayRecord({k: _array(mean[k].numpy().astype(dtypes[k])) for k in arrays})  # type: ignore[arg-type]
        return out, len(self.exchange.contributors[(self.tag, round)])


def _array(a: np.ndarray):  # type: ignore[no-untyped-def]
    from flwr.app import Array

    return Array(a)
