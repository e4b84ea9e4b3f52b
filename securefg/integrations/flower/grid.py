"""A Flower ``Grid`` over Flower's gRPC fleet transport, with one long-lived process per client.

Flower 1.42 runs a deployed ``ClientApp`` in a fresh process per message (state round-trips
through ``Context``), and its simulation engine needs Ray. A secure-sum client holds X25519
secrets for the length of a call and a model for the length of a run, so we keep each client
in one long-lived process instead: the server process hosts Flower's gRPC fleet server
(``start_grpc_server``, bidirectional streaming), each client process runs Flower's client
loop (``start_client_internal``) around a ``ClientApp``, and :class:`BidiGrid` gives the
server-side code Flower's ``Grid`` interface (``send_and_receive`` of ``Message`` objects).

The gRPC stream only knows Flower's legacy instructions, so a ``Message`` rides it inside a
``GetPropertiesIns`` (``tunnel_*`` below): its type and its content (serialized by Flower's own
protobuf serde) go in as two scalar entries and come out as the same ``Message`` on the client, where the ``ClientApp``
(with its Mods) handles it by its custom type. A dead client shows up as a closed stream: the
grid turns it into an error reply, which the protocol layer treats as a dropout.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from flwr.app import Context, Message, RecordDict
from flwr.app.error import Error
from flwr.common import Code, GetPropertiesIns, GetPropertiesRes, Status
from flwr.common.constant import ErrorCode
from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
from flwr.compat.client.client import Client
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict  # pylint: disable=E0611
from flwr.server.client_manager import SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.serverapp.grid import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from securefg.errors import CodecError
from securefg.federation.program import timing

_TYPE = "__type"
_CONTENT = "__content"


def tunnel_pack(message_type: str, content: RecordDict) -> dict[str, bool | bytes | float | int | str]:
    """A ``Message``'s type and content as the scalar dict a legacy ``GetPropertiesIns`` holds
    (the content serialized with Flower's own protobuf serde)."""
    with timing.timed("serialize"):
        return {_TYPE: message_type, _CONTENT: recorddict_to_proto(content).SerializeToString()}


def tunnel_unpack(props: dict[str, bool | bytes | float | int | str]) -> tuple[str, RecordDict]:
    """Inverse of :func:`tunnel_pack`; the bytes are parsed by protobuf, never unpickled."""
    mtype, raw = props.get(_TYPE), props.get(_CONTENT)
    if not isinstance(mtype, str) or not isinstance(raw, bytes):
        raise CodecError("tunnelled message lacks its type or content")
    try:
        with timing.timed("serialize"):
            return mtype, recorddict_from_proto(ProtoRecordDict.FromString(raw))
    except Exception as exc:  # protobuf DecodeError and friends
        raise CodecError(f"tunnelled message content does not parse: {exc}") from exc


class BidiGrid(Grid):
    """Flower's ``Grid`` over the clients connected to a gRPC fleet server.

    Args:
        client_manager (SimpleClientManager): The manager ``start_grpc_server`` registers into.
        run_id (int): Run id stamped on messages. (default: ``1``)
        workers (int): Concurrent in-flight requests. (default: ``64``)
    """

    def __init__(self, client_manager: SimpleClientManager, *, run_id: int = 1, workers: int = 64) -> None:
        self._cm = client_manager
        self._run = Run.create_empty(run_id)
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, 0
        self._nodes: dict[int, ClientProxy] = {}
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bidi-grid")
        self._pending: dict[str, tuple[Message, Future[Message]]] = {}
        self._lock = threading.Lock()
        self.bytes_sent = 0
        self.bytes_received = 0

    # ---------------------------------------------------------------- Grid interface
    def set_run(self, run_id: int) -> None:  # type: ignore[override]
        self._run = Run.create_empty(run_id)

    @property
    def run(self) -> Run:
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content, dst_node_id=dst_node_id, message_type=message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> list[int]:
        """Node ids of the connected clients (stable for as long as a client stays connected)."""
        with self._lock:
            live = self._cm.all()
            known = {p.cid: n for n, p in self._nodes.items()}
            for cid, proxy in sorted(live.items()):
                if cid not in known:
                    node = len(self._nodes) + 1
                    self._nodes[node] = proxy
            return [n for n, p in self._nodes.items() if p.cid in live]

    def push_messages(self, messages: Iterable[Message]) -> list[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex  # as Flower's InMemoryGrid does
            fut = self._pool.submit(self._request, msg)
            self._pending[msg.metadata.message_id] = (msg, fut)
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, reply_to_message_ids: Iterable[str] | None = None, *,
                      message_ids: Iterable[str] | None = None) -> list[Message]:
        """Replies that have arrived to the given requests (``None``: to every pending request).

        The signature is Flower's newer one (1.43 renamed the argument and kept ``message_ids``
        as an alias); a positional call works on both."""
        wanted = reply_to_message_ids if reply_to_message_ids is not None else message_ids
        out = []
        for mid in list(self._pending) if wanted is None else wanted:
            entry = self._pending.get(mid)
            if entry is not None and entry[1].done():
                out.append(entry[1].result())
                del self._pending[mid]
        return out

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        """Send every message and wait for the replies (a failed node gives an error reply)."""
        ids = self.push_messages(messages)
        futures = [self._pending[i][1] for i in ids]
        deadline = None if timeout is None else time.monotonic() + timeout
        for fut in futures:
            fut.exception(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self.pull_messages(ids)

    # --------------------------------------------------------------------- transport
    def _request(self, msg: Message) -> Message:
        proxy = self._nodes.get(msg.metadata.dst_node_id)
        if proxy is None:
            return Message(Error(code=ErrorCode.NODE_UNAVAILABLE, reason="unknown node"), reply_to=msg)
        props = tunnel_pack(msg.metadata.message_type, msg.content)
        self.bytes_sent += _scalar_bytes(props)
        try:
            res = proxy.get_properties(GetPropertiesIns(config=props), timeout=None, group_id=None)
        except Exception as exc:  # noqa: BLE001 -- any failure of the closed stream means the client process is gone
            return Message(Error(code=ErrorCode.NODE_UNAVAILABLE, reason=f"{type(exc).__name__}: {exc}"),
                           reply_to=msg)
        if res.status.code != Code.OK:
            return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=res.status.message),
                           reply_to=msg)
        self.bytes_received += _scalar_bytes(res.properties)
        _, content = tunnel_unpack(res.properties)
        return Message(content, reply_to=msg)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _scalar_bytes(props: dict[str, bool | bytes | float | int | str]) -> int:
    return sum(len(k) + (len(v) if isinstance(v, (bytes, str)) else 8) for k, v in props.items())


class TunnelClient(Client):
    """Client end of the tunnel: rebuilds the ``Message`` and hands it to a ``ClientApp``.

    Args:
        handle (Callable[[Message, Context], Message]): The ``ClientApp`` (with its Mods).
        context (Context): This node's context, kept for the life of the process (Flower's
            gRPC-bidi client loop gives every node id -1 and an empty ``node_config``, so a
            runtime that knows the node's partition passes its own).
    """

    def __init__(self, handle: Callable[[Message, Context], Message], context: Context) -> None:
        self._handle = handle
        self._context = context

    def get_properties(self, ins: GetPropertiesIns) -> GetPropertiesRes:
        mtype, content = tunnel_unpack(dict(ins.config))
        if TaskIdentity._run_id is None:  # noqa: SLF001 - Message() needs a run id in this process
            TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, self._context.run_id, 1
        msg = Message(content, dst_node_id=self._context.node_id, message_type=mtype)
        msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
        reply = self._handle(msg, self._context)
        if reply.has_error():
            return GetPropertiesRes(status=Status(code=Code.GET_PROPERTIES_NOT_IMPLEMENTED,
                                                  message=reply.error.reason), properties={})
        return GetPropertiesRes(status=Status(code=Code.OK, message=""), properties=tunnel_pack(mtype, reply.content))
