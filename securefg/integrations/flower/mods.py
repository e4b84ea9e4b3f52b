"""Client side of securefg protection for a plain Flower app: one Mod and one registration.

An existing ``ClientApp`` whose ``@app.train()`` returns an ``ArrayRecord`` (``"arrays"``) and a
``MetricRecord`` with ``"num-examples"`` adds securefg's secure aggregation in two lines::

    app = ClientApp(mods=[securefg_mod])      # or append securefg_mod to existing mods
    enable_securefg(app)                     # registers the query.securefg action

On a ``train`` message marked by :class:`~securefg.integrations.flower.workflow.SecureFedAvgWorkflow`,
the Mod calls the app's train function, keeps the returned arrays (times ``num-examples``,
through the stack's client transforms, e.g. DP clipping and noise) as this client's input to
the securefg secure sum, and strips them from the reply: the server receives metrics only.
The ``query.securefg`` steps that follow (key advertisement, shares, masked input, unmasking)
are answered by the Mod itself, never by the app. Other messages pass through untouched.

The Mod keeps the call's secrets in this process between messages, so the ClientApp must live
in one process for a round (our gRPC runtime, ``securefg.integrations.flower.local``, does);
Flower deployments that start a process per message would lose them. It does not combine with
Flower's own ``secaggplus_mod`` on the same train function (both take the train reply).
"""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable

from securefg.errors import ProtocolError
from securefg.federation.channel import ChannelIdentity
from securefg.federation.party import SERVER, Party, client_id, is_client
from securefg.federation.party_transport import PartyTransport
from securefg.federation.program.client_runtime import ClientRuntime
from securefg.federation.program.exchange import ClientExchange
from securefg.federation.program.server_runtime import LAYOUT
from securefg.integrations.flower.records import (
    MESSAGE_TYPE,
    RECORD,
    Step,
    step_from_content,
    step_to_content,
)
from securefg.protocol.stack import ProtocolStack

HELLO = "securefg/hello"
DIRECTORY = "securefg/directory"
MARK = "securefg"
"""Name of the ``ConfigRecord`` that marks a train message for securefg aggregation."""

_CLIENTS: dict[tuple[int, int], tuple[ClientRuntime, ClientExchange]] = {}


def _hello(step: Step, ctxt: Context) -> Message | None:
    pid, session, server_pk, stack, n = (step.info.get(k) for k in ("pid", "session", "server_pk", "stack", "clients"))
    if not (isinstance(pid, str) and is_client(pid) and isinstance(session, str) and isinstance(server_pk, str)
            and isinstance(stack, str) and isinstance(n, int) and n >= 1):
        raise ProtocolError("securefg hello lacks pid, session, server_pk, stack or clients")
    ident = ChannelIdentity(pid)
    transport = PartyTransport(ident, session=bytes.fromhex(session),
                               directory={SERVER: bytes.fromhex(server_pk), pid: ident.public_bytes})
    rt = ClientRuntime(transport, Party(pid))
    ex = ClientExchange(rt, ProtocolStack.load(stack), seed=int.from_bytes(ident.public_bytes[:8], "little"),
                        clients=[client_id(k) for k in range(n)])
    rt.on(DIRECTORY, lambda step: _learn_directory(rt, step))
    _CLIENTS[(ctxt.run_id, ctxt.node_id)] = (rt, ex)
    return None


def _learn_directory(rt: ClientRuntime, step: Step) -> None:
    """The other clients' channel keys, for envelopes between two clients (routed by the server)
    such as a client key holder's CKKS public context."""
    keys = {k[3:]: v for k, v in step.info.items() if k.startswith("pk.")}
    if not all(is_client(p) and isinstance(v, str) and len(v) == 64 for p, v in keys.items()):
        raise ProtocolError("securefg directory step holds a malformed channel key")
    rt.transport.learn({p: bytes.fromhex(str(v)) for p, v in keys.items()})


def securefg_mod(msg: Message, ctxt: Context, call_next: ClientAppCallable) -> Message:
    """Flower client Mod: securefg secure aggregation of this client's train result."""
    mtype = msg.metadata.message_type
    key = (ctxt.run_id, ctxt.node_id)
    if mtype == MESSAGE_TYPE:
        step = step_from_content(msg.content)
        if step.action == HELLO:
            _hello(step, ctxt)
            rt, _ = _CLIENTS[key]
            reply = Step(HELLO, info={"pk": rt.transport.public_key.hex()})
            return Message(step_to_content(reply), reply_to=msg)
        if key not in _CLIENTS:
            raise ProtocolError("securefg step before hello: the server must run SecureFedAvgWorkflow.setup first")
        return Message(step_to_content(_CLIENTS[key][0].answer(step)), reply_to=msg)
    if mtype == "train" and MARK in msg.content.config_records:
        if key not in _CLIENTS:
            raise ProtocolError("securefg train before hello: the server must run SecureFedAvgWorkflow.setup first")
        mark = msg.content.config_records.pop(MARK)
        tag, rnd = mark.get("tag"), mark.get("round")
        if not isinstance(tag, str) or not isinstance(rnd, int):
            raise ProtocolError("securefg train mark lacks tag or round")
        reply = call_next(msg, ctxt)
        if reply.has_error():
            return reply
        content = reply.content
        if len(content.array_records) != 1 or not content.metric_records:
            raise ProtocolError("the train function must return one ArrayRecord and a MetricRecord with 'num-examples' "
                                "for securefg aggregation")
        (aname,) = list(content.array_records)
        metrics = next(iter(content.metric_records.values()))
        weight = float(metrics.get("num-examples", 1.0))  # type: ignore[arg-type]
        arrays: ArrayRecord = content.array_records.pop(aname)
        tensors = {k: torch.as_tensor(v.numpy()).double() for k, v in arrays.items()}
        rt, ex = _CLIENTS[key]
        ex.contribute(tag, rnd, tensors, weight=weight)
        # the layout of what it contributed (public model metadata) goes back with the reply
        content.config_records[MARK] = ConfigRecord({"layout": str(rt.reply_info.pop(LAYOUT + tag))})
        return Message(content, reply_to=msg)
    return call_next(msg, ctxt)


def enable_securefg(app: ClientApp) -> ClientApp:
    """Register the ``query.securefg`` action on ``app`` so its steps reach :func:`securefg_mod`."""

    def _unreachable(msg: Message, ctxt: Context) -> Message:
        raise ProtocolError(f"{RECORD} step reached the app: add securefg_mod to ClientApp(mods=[...])")

    app.query("securefg")(_unreachable)
    return app
