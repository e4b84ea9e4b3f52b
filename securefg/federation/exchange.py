"""The exchange API methods are written against: *what* to exchange, not *how*.

Each call names a message tag; the :class:`~securefg.protocol.stack.ProtocolStack` decides
which mechanism carries it. Return values are what the receiving party decoded from its
envelopes: fresh tensors, never references to the sender's objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch

from securefg.errors import ConfigError, InvalidInputError
from securefg.federation.codec import TensorSpec, decode_tensors, encode_tensors
from securefg.federation.flatten import Layout, flatten, unflatten
from securefg.federation.party import SERVER, Party
from securefg.federation.transport import InProcessTransport
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.stack import WIRE_DTYPES, ProtocolStack, Resolved
from securefg.protocol.transform_rules import (
    refuse_all,
    require_client_side,
    require_item_transforms,
    require_local,
)

Tensors = Mapping[str, torch.Tensor]


def to_wire(res: Resolved, tag: str, tensors: Tensors) -> dict[str, torch.Tensor]:
    """The tensors as they travel: floating ones cast to the binding's ``wire_dtype``, if any.

    Raises:
        InvalidInputError: a finite value that the wire precision cannot hold (e.g. > 65504 in
            float16): say so rather than send Inf.
    """
    dtype = WIRE_DTYPES.get(res.binding.wire_dtype or "")
    if dtype is None:
        return dict(tensors)
    out = {}
    for name, t in tensors.items():
        if t.is_floating_point() and t.dtype != dtype:
            cast = t.detach().to(dtype)
            if not bool(torch.isfinite(cast).all()) and bool(torch.isfinite(t).all()):
                raise InvalidInputError(
                    f"{tag!r}: {name!r} has values beyond the range of wire_dtype {res.binding.wire_dtype!r}; "
                    "use a wider wire_dtype for this tag in the stack"
                )
            t = cast
        out[name] = t
    return out


def from_wire(decoded: Mapping[str, torch.Tensor], like: Tensors) -> dict[str, torch.Tensor]:
    """The receiver's tensors back in the dtypes the exchange was called with."""
    return {k: v.to(like[k].dtype) if v.dtype != like[k].dtype else v for k, v in decoded.items()}


class Exchange:
    """Collective operations between the server and clients, per message tag.

    Args:
        transport (InProcessTransport): The network.
        stack (ProtocolStack): Which mechanism carries which tag.
        parties (Mapping[str, Party]): Every party's private state.
        server (str): The server's party id. (default: ``"server"``)
        seed (int): Seed for simulation randomness (shuffles, dropouts). (default: ``0``)
    """

    def __init__(
        self,
        *,
        transport: InProcessTransport,
        stack: ProtocolStack,
        parties: Mapping[str, Party],
        server: str = SERVER,
        seed: int = 0,
    ) -> None:
        self.transport = transport
        self.stack = stack
        self.parties = parties
        self.server = server
        self.round = -1
        self.rng = torch.Generator().manual_seed(seed)
        self.dropouts: dict[str, frozenset[str]] = {}
        self.calls: dict[str, ExchangeKind] = {}

    @property
    def clients(self) -> list[str]:
        return [p for p in self.parties if p.startswith("client/")]

    def _call(self, tag: str, kind: ExchangeKind) -> tuple[Resolved, ExchangeCall]:
        prev = self.calls.setdefault(tag, kind)
        if prev is not kind:
            raise InvalidInputError(f"tag {tag!r} was used as {prev.value!r} and now as {kind.value!r}")
        res = self.stack.resolve(tag, kind)
        call = ExchangeCall(
            transport=self.transport,
            parties=self.parties,
            round=self.round,
            tag=tag,
            params=res.mechanism.params,
            server=self.server,
            rng=self.rng,
            dropouts=self.dropouts,
            kind=kind,
        )
        return res, call

    # -------------------------------------------------------------------- byte exchanges
    def broadcast(self, tag: str, tensors: Tensors, *, to: Iterable[str] | None = None) -> dict[str, dict[str, torch.Tensor]]:
        """Server -> clients. Returns each receiving client's decoded copy."""
        res, call = self._call(tag, ExchangeKind.BROADCAST)
        receivers = list(to) if to is not None else self.clients
        wire = to_wire(res, tag, tensors)
        spec = TensorSpec.like(wire)
        got = res.mechanism.run_broadcast(call, encode_tensors(wire), receivers)
        return {pid: from_wire(decode_tensors(b, spec=spec), tensors) for pid, b in got.items()}

    def send(self, tag: str, tensors: Tensors, *, sender: str, receiver: str) -> dict[str, torch.Tensor]:
        """Point to point. Returns the receiver's decoded copy."""
        res, call = self._call(tag, ExchangeKind.SEND)
        wire = to_wire(res, tag, tensors)
        got = res.mechanism.run_send(call, encode_tensors(wire), sender, receiver)
        return from_wire(decode_tensors(got, spec=TensorSpec.like(wire)), tensors)

    def relay(
        self, tag: str, items: Mapping[str, bytes], *, exclude_self: bool = True, shuffle: bool = True
    ) -> dict[str, list[bytes]]:
        """Server forwards clients' opaque items to the other clients (see relay mechanisms)."""
        res, call = self._call(tag, ExchangeKind.RELAY)
        require_item_transforms(tag, res.transforms)
        return res.mechanism.run_relay(call, items, exclude_self=exclude_self, shuffle=shuffle)

    # ------------------------------------------------------------------ vector exchanges
    def _vectors(self, inputs: Mapping[str, Tensors], tag: str) -> tuple[dict[str, torch.Tensor], Layout]:
        if not inputs:
            raise InvalidInputError(f"{tag!r}: no inputs")
        layout: Layout | None = None
        vecs = {}
        for pid, tensors in inputs.items():
            vec, lay = flatten(tensors, what=f"{tag!r} from {pid}")
            if layout is None:
                layout = lay
            elif lay != layout:
                raise InvalidInputError(f"{tag!r}: {pid} sent tensors whose names/shapes differ from the others'")
            vecs[pid] = vec
        assert layout is not None
        return vecs, layout

    def aggregate(
        self,
        tag: str,
        inputs: Mapping[str, Tensors],
        *,
        weights: Mapping[str, float] | None = None,
        mean: bool = True,
        side: Mapping[str, Tensors] | None = None,
    ) -> dict[str, torch.Tensor]:
        """The server learns Σ_k w_k x_k (divided by Σ_k w_k over survivors when ``mean``).

        Each client appends its weight to its weighted vector, so the weight total over the
        clients that actually survived comes out of the same protected sum; a plain sum
        (``mean=False``, no weights, no side inputs) appends nothing, so a tag's clip need only
        cover the values.

        ``side`` gives each client small public counts (e.g. how much weight it puts on each
        model block) that are summed in the same protected sum, like the weight: not weighted,
        not clipped, not noised. Their sums come back under their own names, never divided.

        Raises:
            InvalidInputError: A negative weight, a zero weight total for a mean, side inputs
                missing for a client, or a side name that is also an input name.
        """
        res, call = self._call(tag, ExchangeKind.AGGREGATE)
        vecs, layout = self._vectors(inputs, tag)
        side_vecs: dict[str, torch.Tensor] = {}
        side_layout: Layout | None = None
        if side is not None:
            if set(side) != set(inputs):
                raise InvalidInputError(f"{tag!r}: side inputs from {sorted(side)} but inputs from {sorted(inputs)}")
            side_vecs, side_layout = self._vectors(side, f"{tag} (side)")
            clash = {name for name, _, _ in side_layout.fields} & {name for name, _, _ in layout.fields}
            if clash:
                raise InvalidInputError(f"{tag!r}: side names {sorted(clash)} are also input names")
        weighted = {}
        with_weight = mean or weights is not None or side is not None
        for pid, vec in vecs.items():
            w = 1.0 if weights is None else float(weights[pid])
            if not w >= 0:
                raise InvalidInputError(f"{tag!r}: weight of {pid} must be >= 0, got {w}")
            v = vec * w
            for t in res.transforms:
                v = t.client(call, pid, v)
            extra = side_vecs.get(pid, torch.zeros(0, dtype=torch.float64))
            weight = torch.tensor([w] if with_weight else [], dtype=torch.float64)
            weighted[pid] = torch.cat([v, extra, weight])
        call.count_tail = (side_layout.size if side_layout is not None else 0) + int(with_weight)
        call.weighted = with_weight
        outcome = res.mechanism.run_aggregate(call, weighted)
        total = outcome.total[: layout.size]
        wsum = float(outcome.total[-1]) if with_weight else float("nan")
        for t in res.transforms:
            total = t.server(call, total, outcome.contributors)
        if mean:
            if wsum <= 0:
                raise InvalidInputError(f"{tag!r}: total weight of the survivors is {wsum}")
            total = total / wsum
        self.last_contributors = outcome.contributors
        out = unflatten(total, layout)
        if side_layout is not None:
            out.update(unflatten(outcome.total[layout.size : layout.size + side_layout.size], side_layout))
        return out

    def peer_sum(self, tag: str, target: str, inputs: Mapping[str, Tensors]) -> dict[str, torch.Tensor]:
        """``target`` learns only Σ_k inputs[k] of its peers (FedStruct's Ā[i])."""
        res, call = self._call(tag, ExchangeKind.PEER_SUM)
        if target in inputs:
            raise InvalidInputError(f"{tag!r}: target {target} cannot contribute to its own peer sum")
        vecs, layout = self._vectors(inputs, tag)
        for t in res.transforms:
            vecs = {pid: t.client(call, pid, v) for pid, v in vecs.items()}
        outcome = res.mechanism.run_peer_sum(call, target, vecs)
        total = outcome.total
        for t in res.transforms:
            total = t.server(call, total, outcome.contributors)
        return unflatten(total, layout)

    def shared_sum(self, tag: str, inputs: Mapping[str, Tensors]) -> dict[str, dict[str, torch.Tensor]]:
        """Every client learns Σ_k inputs[k] ("aggregate, then broadcast back"); the stack decides
        whether the server learns it too (``secure_sum``) or only a blinded copy (``blind_sum``).

        Transforms run as each client on its vector before the sum (``dp_gaussian`` in
        ``distributed`` or ``local`` mode: clip and add a noise share); their server step only
        records the release in the accountant, since the server may hold no result to noise.

        Returns:
            ``{client id: the sum it decoded}`` for every input client still reachable.

        Raises:
            ConfigError: A transform that needs a server-side step on the result (central noise).
        """
        res, call = self._call(tag, ExchangeKind.SHARED_SUM)
        require_client_side(tag, res.transforms)
        vecs, layout = self._vectors(inputs, tag)
        for t in res.transforms:
            vecs = {pid: t.client(call, pid, v) for pid, v in vecs.items()}
        got = res.mechanism.run_shared_sum(call, vecs)
        if got:
            first = next(iter(got.values()))
            self.last_contributors = first.contributors
            for t in res.transforms:  # accounting only: distributed and local modes add nothing here
                t.server(call, first.total, first.contributors)
        return {pid: unflatten(o.total, layout) for pid, o in got.items()}

    def personalized_aggregate(
        self, tag: str, inputs: Mapping[str, Tensors], coefficients: Mapping[str, Mapping[str, float]]
    ) -> dict[str, dict[str, torch.Tensor]]:
        """Client i receives Σ_j coefficients[i][j] x_j; nobody sees an individual x_j."""
        res, call = self._call(tag, ExchangeKind.PERSONALIZED_AGGREGATE)
        refuse_all(tag, res.transforms)
        vecs, layout = self._vectors(inputs, tag)
        got = res.mechanism.run_personalized_aggregate(call, vecs, coefficients)
        return {pid: unflatten(v, layout) for pid, v in got.items()}

    def similarity(
        self, tag: str, inputs: Mapping[str, torch.Tensor], *, metric: str = "cosine"
    ) -> tuple[list[str], torch.Tensor]:
        """The server learns the pairwise similarity matrix of private vectors."""
        res, call = self._call(tag, ExchangeKind.SIMILARITY)
        vecs, _ = self._vectors({k: {"h": v} for k, v in inputs.items()}, tag)
        for t in res.transforms:
            vecs = {pid: t.client(call, pid, v) for pid, v in vecs.items()}
        pairs = res.mechanism.run_similarity(call, vecs, metric)
        order = sorted(vecs)
        mat = torch.tensor([[pairs[(a, b)] for b in order] for a in order], dtype=torch.float64)
        return order, mat

    def collect(self, tag: str, inputs: Mapping[str, Tensors]) -> dict[str, dict[str, torch.Tensor]]:
        """The server learns every client's tensors individually, keyed by a pseudonym.

        Under ``plaintext`` the pseudonym is the client's id; under ``mailbox`` it is a session
        pseudonym the server cannot link to a client. Transforms run as each client on its
        flattened ``float64`` vector before upload, so they must need no server step (only
        ``dp_gaussian`` with ``mode = "local"``).

        Raises:
            ConfigError: A transform with a server-side step (central or distributed noise).
        """
        res, call = self._call(tag, ExchangeKind.COLLECT)
        require_local(tag, res.transforms)
        vecs, layout = self._vectors(inputs, tag)
        for t in res.transforms:
            vecs = {pid: t.client(call, pid, v) for pid, v in vecs.items()}
        spec = TensorSpec({"x": (torch.float64, (layout.size,))})
        got = res.mechanism.run_collect(call, {pid: encode_tensors({"x": v}) for pid, v in vecs.items()})
        return {nym: unflatten(decode_tensors(b, spec=spec)["x"], layout) for nym, b in got.items()}

    def reply(self, tag: str, outputs: Mapping[str, Tensors]) -> dict[str, dict[str, torch.Tensor]]:
        """The owner of each pseudonym (from :meth:`collect`) receives its tensors.

        Returns:
            ``{client id: the tensors it decoded}``: only the owner of a pseudonym reads its output.
        """
        res, call = self._call(tag, ExchangeKind.REPLY)
        if res.transforms:
            raise ConfigError(f"tag {tag!r}: a reply exchange takes no transforms")
        if not outputs:
            raise InvalidInputError(f"{tag!r}: no outputs")
        specs = [TensorSpec.like(t) for t in outputs.values()]
        spec = specs[0]
        if any(s != spec for s in specs):
            raise InvalidInputError(f"{tag!r}: outputs have different tensor names, shapes or dtypes")
        like = next(iter(outputs.values()))
        wire = {nym: to_wire(res, tag, t) for nym, t in outputs.items()}
        wire_spec = TensorSpec.like(next(iter(wire.values())))
        got = res.mechanism.run_reply(call, {nym: encode_tensors(t) for nym, t in wire.items()})
        return {pid: from_wire(decode_tensors(b, spec=wire_spec), like) for pid, b in got.items()}

    def tags(self) -> dict[str, ExchangeKind]:
        """Every tag used so far and its exchange kind."""
        return dict(self.calls)


def weights_from_sizes(sizes: Mapping[str, int]) -> dict[str, float]:
    """FedAvg weights n_k (normalised by the exchange over survivors)."""
    return {k: float(v) for k, v in sizes.items()}


__all__: Sequence[str] = ["Exchange", "weights_from_sizes"]
