"""A receiver's screen of the NSF rows relayed to it in FedStruct-B (Algorithms 4/5, ``fedstruct/nsf``).

The relay is sealed and shuffled, so a receiver cannot tell who sent an item and nothing binds
an item's ids to its sender: a malicious owner can claim other owners' nodes or send rows far
outside the honest range (:mod:`securefg.attacks.crafted_nsf`). Honest items satisfy three
facts a receiver can check without learning anything new, and the screen enforces them:

1. **No item claims a node the receiver owns.** Such an item is provably false and is dropped
   whole (its other rows are as untrustworthy).
2. **No two items claim the same node.** The receiver cannot tell which claim is true, so that
   node's row is taken from neither (it stays zero, as for a node nobody sent).
3. **Row norms stay in the honest range**: each received row is clipped to
   :data:`NSF_NORM_FACTOR` times the median row norm of the receiver's own and accepted rows
   (honest NSFs of one kind share a scale: one-hot degrees, ``N(0, s^2)`` Hop2Vec draws, one
   Node2Vec table), so a scaled item weighs no more than an honest one.

A structurally malformed item (undecodable, wrong keys, shapes or dtypes, ids out of range,
non-finite rows) is a protocol violation and raises :class:`~securefg.errors.ProtocolError`.
The counts of what was dropped or clipped are returned so an audit can report them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from securefg.errors import ProtocolError
from securefg.federation.codec import decode_tensors

#: A received row is clipped to this times the median row norm (own and accepted rows). Honest
#: NSFs sit well inside it (the largest Node2Vec row of a Cora-sized table is about 2x the median).
NSF_NORM_FACTOR = 4.0


class MalformedNSFError(ProtocolError, ValueError):
    """A relayed ``fedstruct/nsf`` item is not an ``(ids, s)`` pair of the run's shape."""


@dataclass(frozen=True)
class NSFScreen:
    """What a receiver's screen dropped or clipped (all zero in an honest run)."""

    items: int
    items_dropped: int
    ids_conflicting: int
    rows_clipped: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def decode_item(blob: bytes, *, num_nodes: int, width: int, index: int) -> tuple[Tensor, Tensor]:
    """``(ids, rows)`` of one relayed item, checked for shape, dtype, range and finiteness."""
    try:
        item = decode_tensors(blob)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the same protocol violation
        raise MalformedNSFError(f"fedstruct/nsf item {index}: cannot be decoded ({exc})") from None
    if set(item) != {"ids", "s"}:
        raise MalformedNSFError(f"fedstruct/nsf item {index}: expected keys ['ids', 's'], got {sorted(item)}")
    ids, rows = item["ids"], item["s"]
    if ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise MalformedNSFError(f"fedstruct/nsf item {index}: ids must be a 1-D integer tensor, "
                                f"got {tuple(ids.shape)} {ids.dtype}")
    if rows.dim() != 2 or rows.size(0) != ids.numel() or rows.size(1) != width:
        raise MalformedNSFError(f"fedstruct/nsf item {index}: rows must be [{ids.numel()}, {width}], "
                                f"got {list(rows.shape)}")
    if not rows.dtype.is_floating_point:
        raise MalformedNSFError(f"fedstruct/nsf item {index}: rows must be floating point, got {rows.dtype}")
    ids = ids.long()
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        raise MalformedNSFError(f"fedstruct/nsf item {index}: node ids must lie in [0, {num_nodes}), "
                                f"got [{int(ids.min())}, {int(ids.max())}]")
    if ids.unique().numel() != ids.numel():
        raise MalformedNSFError(f"fedstruct/nsf item {index}: repeats a node id")
    if not bool(torch.isfinite(rows).all()):
        raise MalformedNSFError(f"fedstruct/nsf item {index}: rows hold NaN or infinite values")
    return ids, rows.float()


def screened_table(ids: Tensor, rows: Tensor, items: list[bytes], num_nodes: int,
                   *, norm_factor: float = NSF_NORM_FACTOR) -> tuple[Tensor, NSFScreen]:
    """A receiver's full ``[n, d_s]`` S from its own rows and the relayed items, screened (module docs).

    Raises:
        MalformedNSFError: An item that is not a well-formed ``(ids, s)`` pair of this run.
    """
    own = ids.long()
    width = rows.size(1)
    decoded = [decode_item(blob, num_nodes=num_nodes, width=width, index=i) for i, blob in enumerate(items)]
    mine = torch.zeros(num_nodes, dtype=torch.bool)
    mine[own] = True
    kept = [(i, r) for i, r in decoded if not bool(mine[i].any())]
    claims = torch.zeros(num_nodes, dtype=torch.long)
    for i, _ in kept:
        claims[i] += 1
    contested = claims > 1

    table = torch.zeros(num_nodes, width)
    table[own] = rows.float()
    accepted = [(i[~contested[i]], r[~contested[i]]) for i, r in kept]
    norms = torch.cat([rows.float().norm(dim=1), *(r.norm(dim=1) for _, r in accepted)])
    median = float(norms.median()) if norms.numel() else 0.0
    bound = norm_factor * median if median > 0 else float("inf")
    clipped = 0
    for i, r in accepted:
        n = r.norm(dim=1, keepdim=True)
        over = n.squeeze(1) > bound
        clipped += int(over.sum())
        table[i] = torch.where(over.unsqueeze(1), r * (bound / n.clamp_min(1e-12)), r)
    return table, NSFScreen(items=len(items), items_dropped=len(decoded) - len(kept),
                            ids_conflicting=int(contested.sum()), rows_clipped=clipped)


__all__ = ["NSF_NORM_FACTOR", "MalformedNSFError", "NSFScreen", "decode_item", "screened_table"]
