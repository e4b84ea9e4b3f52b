"""The party-program runtimes on Flower: a step is a Flower ``Message`` over gRPC.

The server side is a :class:`~securefg.federation.program.server_runtime.ServerRuntime` whose
:meth:`~FlowerServerRuntime.exchange_steps` sends one ``query.securefg`` ``Message`` per party
through a Flower ``Grid`` and reads the replies; a party whose process died, whose stream
closed or whose ``ClientApp`` raised gives an error reply, which the shared runtime records as
a dropout. The client side is a Flower ``ClientApp`` with one handler on the custom action
``query.securefg`` that hands the step to the party's
:class:`~securefg.federation.program.client_runtime.ClientRuntime`; our client Mods
(:mod:`securefg.integrations.flower.mods`) wrap it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import Mod
from flwr.serverapp.grid import Grid

from securefg.errors import AuthenticationError, ProtocolError
from securefg.federation.program.client_runtime import ClientRuntime
from securefg.federation.program.server_runtime import ServerRuntime, StepError
from securefg.federation.program.step import Step
from securefg.integrations.flower.records import MESSAGE_TYPE, step_from_content, step_to_content

__all__ = ["ACTION_REFUSED", "ClientRuntime", "FlowerServerRuntime", "ServerRuntime", "client_app"]

#: The step a server sends a node it refuses (the node stops with its ``reason``).
ACTION_REFUSED = "securefg/refused"


@dataclass
class FlowerServerRuntime(ServerRuntime):
    """The server party on Flower.

    Args:
        grid (Grid): Flower's grid to the party nodes.
        nodes (dict[str, int]): Party id -> Flower node id (filled by :meth:`connect`).
    """

    grid: Grid | None = None
    nodes: dict[str, int] = field(default_factory=dict)

    def connect(self, expected: Iterable[str], *, pinned: Mapping[str, bytes] | None = None,
                source: str = "the pinned directory") -> None:
        """Map Flower node ids to party ids: every connected node names itself in ``hello``.

        With ``pinned`` (party id -> channel public key), a node must also present its party's
        pinned key in ``hello``; one that presents another is sent ``securefg/refused`` and the
        run stops. (The claim itself proves nothing: a party without the private key could not
        open or seal a single envelope. The check turns a stale or mixed-up key into a clear
        error before the run starts.)

        Raises:
            ProtocolError: A node claims an unexpected or taken id, or an expected party is missing.
            AuthenticationError: A node presented a channel key other than its pinned one.
        """
        assert self.grid is not None
        want = set(expected)
        node_ids = list(self.grid.get_node_ids())
        msgs = [Message(step_to_content(Step("hello")), dst_node_id=n, message_type=MESSAGE_TYPE) for n in node_ids]
        for rep in self.grid.send_and_receive(msgs):
            if rep.has_error():
                continue
            info = step_from_content(rep.content).info
            pid = info.get("pid")
            if not isinstance(pid, str) or pid not in want or pid in self.nodes:
                raise ProtocolError(f"node {rep.metadata.src_node_id} claims to be {pid!r}, expected one of {sorted(want)}")
            if pinned is not None and info.get("public_key") != pinned[pid].hex():
                reason = (f"{pid!r} presented channel key {str(info.get('public_key'))[:16]}..., but {source} pins "
                          f"{pinned[pid].hex()[:16]}... for it")
                refusal = Step(ACTION_REFUSED, info={"reason": reason})
                self.grid.send_and_receive([Message(step_to_content(refusal), dst_node_id=rep.metadata.src_node_id,
                                                    message_type=MESSAGE_TYPE)], timeout=10)
                raise AuthenticationError(reason)
            self.nodes[pid] = rep.metadata.src_node_id
        missing = want - set(self.nodes)
        if missing:
            raise ProtocolError(f"parties {sorted(missing)} did not connect")
        self.peers = sorted(self.nodes)

    def exchange_steps(self, requests: Mapping[str, Step]) -> dict[str, Step | StepError]:
        assert self.grid is not None
        node_to_pid = {n: p for p, n in self.nodes.items()}
        msgs = [Message(step_to_content(req), dst_node_id=self.nodes[pid], message_type=MESSAGE_TYPE)
                for pid, req in requests.items()]
        out: dict[str, Step | StepError] = {}
        for rep in self.grid.send_and_receive(msgs):
            pid = node_to_pid[rep.metadata.src_node_id]
            if rep.has_error():
                out[pid] = StepError(rep.error.reason)
                continue
            try:
                out[pid] = step_from_content(rep.content)
            except Exception as exc:  # noqa: BLE001 - a reply that does not parse drops its sender
                out[pid] = StepError(f"malformed reply: {exc}")
        return out


def client_app(rt: ClientRuntime, *, mods: list[Mod] | None = None) -> ClientApp:
    """A Flower ``ClientApp`` answering ``query.securefg`` steps with ``rt``."""
    app = ClientApp(mods=mods or [])

    @app.query("securefg")
    def _handle(msg: Message, context: Context) -> Message:
        return Message(step_to_content(rt.answer(step_from_content(msg.content))), reply_to=msg)

    return app
