r"""Receiver i's boundary rows: the public row layout of its Ā peer sums (option ``abar_rows``).

Row ``v`` of peer ``k``'s message :math:`B_{i\cdot k} = \tilde{A}_k^{[i]} P_k^{(\ell-1)}` is
:math:`\sum_{w \in N(v) \cap V_k} P_k^{(\ell-1)}[w]`: zero in *every* peer's message unless ``v`` has
a neighbour outside ``V_i``. So receiver ``i``'s peer sums need only its boundary rows
:math:`R_i = \{v \in V_i : N(v) \not\subseteq V_i\}`, and one layout for all of them (a masked sum
needs every summand in the same layout) skips the same zero rows for every peer. Ā is unchanged:
the kept rows carry the same values, the skipped ones were exact zeros (``0 + own = own``).

With ``abar_rows = "boundary"`` (the default) each client ``i``, before hop 2, relays a fixed-size
item (``fedstruct/boundary``: its index, an ``n_i``-bit mask of ``R_i``, a random salt) to the other
clients; under ``fedstruct_secure`` the relay seals it end to end. Who learns what:

* every other client learns ``R_i`` (which of ``i``'s nodes have a neighbour in some other client;
  it knew only those next to its own nodes);
* the server learns ``|R_i|`` (the length of every masked vector to ``i``), not ``R_i``; under
  ``plaintext`` it reads ``R_i`` too;
* under edge DP, ``R_i`` is computed on the reported graph (post-processing, covered by the epsilon).

Peers sum under the tensor name ``b/<digest>``, a salted hash of the mask: the server, which checks
that every peer reports the same names and shapes, so refuses the sum if ``i`` told two peers
different layouts (a receiver could otherwise place one peer's row where another sends zeros, and
read it alone). A peer refuses a layout that omits a node of ``i`` it has an edge to (its row would
be dropped). ``abar_rows = "all"`` keeps the dense ``[n_i, n]`` layout and sends no item.

Columns: at hop 2 the columns of ``V_i \ R_i`` are zero in every peer's message (a peer's hop-1 rows
touch only its own nodes and its neighbours, and ``i``'s neighbours of other clients are in
``R_i``), but that saves at most ``(n_i - |R_i|) / n`` of one hop in ``L_s - 1``; from hop 3 on
no public rule exists (a column's support depends on walks through other clients' edges). Not used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from securefg.errors import InvalidInputError, ProtocolError
from securefg.federation.codec import TensorSpec, decode_tensors, encode_tensors
from securefg.models.fedstruct import ClientGraphView, NodeDirectory

TAG_BOUNDARY = "fedstruct/boundary"
ROW_LAYOUTS = ("boundary", "all")
SALT_BYTES = 16
DENSE_KEY = "b"
"""The summed tensor's name in the dense layout (``abar_rows = "all"``)."""

_SPEC = TensorSpec({"client": (torch.int64, (1,)), "mask": (torch.bool, (None,)),
                    "salt": (torch.uint8, (SALT_BYTES,))})


def boundary_mask(view: ClientGraphView) -> Tensor:
    """``[n_k]`` bool: which of the view's own nodes have at least one inter-edge."""
    mask = torch.zeros(view.num_nodes, dtype=torch.bool)
    mask[view.local_rows(view.inter_edges[0])] = True
    return mask


@dataclass(frozen=True)
class BoundaryLayout:
    """Receiver ``receiver``'s row layout for its Ā peer sums.

    Args:
        receiver (int): Client ``i`` whose rows these are.
        mask (Tensor): ``[n_i]`` bool, the rows kept (``R_i``).
        salt (bytes): ``i``'s random salt for :attr:`key` (so the key does not give ``R_i`` away).
    """

    receiver: int
    mask: Tensor
    salt: bytes

    @classmethod
    def own(cls, view: ClientGraphView, *, salt: bytes) -> BoundaryLayout:
        """Client ``view.client_id``'s own layout, from its edges (``salt``: ``SALT_BYTES`` random bytes)."""
        if len(salt) != SALT_BYTES:
            raise InvalidInputError(f"the boundary salt must be {SALT_BYTES} bytes, got {len(salt)}")
        mask = boundary_mask(view)
        if mask.numel() and not bool(mask.any()):  # no row to sum: keep row 0 (zeros from every peer),
            mask[0] = True                           # so that no masked sum has length zero
        return cls(view.client_id, mask, bytes(salt))

    @property
    def rows(self) -> Tensor:
        """The kept local rows, ascending."""
        return torch.nonzero(self.mask).flatten()

    @property
    def key(self) -> str:
        """The name every peer sums its rows under: ``b/`` + a salted digest of the mask."""
        h = hashlib.sha256(self.salt + self.receiver.to_bytes(8, "little") + self.mask.numpy().tobytes())
        return f"{DENSE_KEY}/{h.hexdigest()[:32]}"

    def item(self) -> bytes:
        """The relayed item (``fedstruct/boundary``): fixed size for a given ``n_i``."""
        return encode_tensors({"client": torch.tensor([self.receiver]), "mask": self.mask,
                               "salt": torch.frombuffer(bytearray(self.salt), dtype=torch.uint8)})

    @classmethod
    def from_item(cls, blob: bytes, directory: NodeDirectory) -> BoundaryLayout:
        """Parse another client's item (checked: a known client, a mask of its size).

        Raises:
            ProtocolError: A malformed item, an unknown client or a mask of the wrong length.
        """
        t = decode_tensors(blob, spec=_SPEC)  # explicit codec: never pickle on received data
        i = int(t["client"][0])
        if not 0 <= i < directory.num_clients:
            raise ProtocolError(f"{TAG_BOUNDARY!r}: an item names client {i}, not one of {directory.num_clients}")
        if t["mask"].numel() != directory.size_of(i):
            raise ProtocolError(f"{TAG_BOUNDARY!r}: client {i}'s mask has {t['mask'].numel()} rows; "
                                f"the directory gives it {directory.size_of(i)} nodes")
        return cls(i, t["mask"].clone(), bytes(t["salt"].tolist()))

    def check_covers(self, view: ClientGraphView, directory: NodeDirectory) -> None:
        """As a peer: every node of the receiver this client has an edge to must be a kept row.

        Raises:
            ProtocolError: The layout omits such a node (this client's row for it would be lost).
        """
        ends = view.inter_edges[1, view.inter_owner == self.receiver]
        missing = ends[~self.mask[directory.local_index(ends)]]
        if missing.numel():
            raise ProtocolError(f"client {self.receiver}'s boundary layout omits its node(s) "
                                f"{missing.unique()[:5].tolist()} that client {view.client_id} has an edge to; "
                                "refusing to send its Ā rows in that layout")

    def restrict(self, message: Tensor) -> dict[str, Tensor]:
        """A peer's ``[n_i, n]`` message as its contribution: the kept rows under :attr:`key`."""
        return {self.key: message[self.rows.to(message.device)]}

    def expand(self, summed: Mapping[str, Tensor], own: Tensor) -> Tensor:
        """As the receiver: its own ``[n_i, n]`` term plus the peers' sum on the kept rows.

        Raises:
            ProtocolError: The sum is not under this layout's name and shape.
        """
        rows = self.rows.to(own.device)
        got = summed.get(self.key)
        if got is None or tuple(got.shape) != (rows.numel(), own.size(1)):
            raise ProtocolError(f"client {self.receiver}'s Ā peer sum does not match its boundary layout")
        out = own.clone()
        out[rows] = got.to(own.device, own.dtype) + own[rows]
        return out


def read_layouts(items: Iterable[bytes], directory: NodeDirectory, *, me: int) -> dict[int, BoundaryLayout]:
    """Every other client's layout from the relayed items (one each, all present).

    Raises:
        ProtocolError: A duplicate, this client's own index, or a client missing.
    """
    out: dict[int, BoundaryLayout] = {}
    for blob in items:
        layout = BoundaryLayout.from_item(blob, directory)
        if layout.receiver == me or layout.receiver in out:
            raise ProtocolError(f"{TAG_BOUNDARY!r}: client {layout.receiver}'s layout came twice (or as its own)")
        out[layout.receiver] = layout
    missing = sorted(set(range(directory.num_clients)) - set(out) - {me})
    if missing:
        raise ProtocolError(f"{TAG_BOUNDARY!r}: no boundary layout from client(s) {missing}")
    return out
