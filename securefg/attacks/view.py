"""What an adversary holds: its view of the transcript, decoded only where it has the keys.

The view of a coalition is the union of its members' views. A member knows every envelope it
*received* (``Transcript.view``) and every envelope it *sent* (its own messages). Of those it can
read:

* ``plaintext`` and ``aggregate`` payloads: decoded with the safe codec
  (:func:`~securefg.federation.codec.decode_tensors`, no pickle);
* nothing of ``masked``, ``keys`` or ``ciphertext`` payloads (the server never holds a CKKS secret
  key; clients' CKKS keys decrypt only what a mechanism hands them);
* ``sealed`` items only through :meth:`AdversaryView.own_state`: a client's own decrypted relay
  items, which the method keeps in that client's private state (e.g. CeFGC's received diffusion
  models). This is the one door into party state, and it opens only for adversary members.

Payload bytes exist only when the run kept them (``RunConfig(keep_payloads=...)``); a record
without bytes counts as unreadable, and :meth:`AdversaryView.missing_payloads` says so.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from securefg.errors import CodecError
from securefg.federation.codec import decode_tensors
from securefg.federation.envelope import Form
from securefg.federation.party import Party
from securefg.federation.transcript import Record, Transcript

#: Forms an adversary can read with the keys it holds by protocol.
READABLE = frozenset({Form.PLAINTEXT, Form.AGGREGATE})


class AdversaryView:
    """The union of some parties' views of a transcript.

    Args:
        transcript (Transcript): The run's transcript.
        members (Iterable[str]): Adversarial party ids.
        parties (Mapping[str, Party], optional): The run's parties; only members' states are
            reachable, through :meth:`own_state`. (default: none)
    """

    def __init__(self, transcript: Transcript, members: Iterable[str], parties: Mapping[str, Party] | None = None) -> None:
        self.members = tuple(members)
        if not self.members:
            raise ValueError("an adversary view needs at least one member")
        mine = set(self.members)
        self._records = [r for r in transcript if r.receiver in mine or r.sender in mine]
        self._parties = {p: parties[p] for p in self.members if parties is not None and p in parties}
        self._cache: dict[int, dict[str, torch.Tensor] | None] = {}

    # --------------------------------------------------------------------------- records
    def records(self, tag: str | None = None, *, round: int | None = None, sender: str | None = None,
                received: bool | None = None, form: Form | None = None) -> list[Record]:
        """Records in the view, filtered by tag glob, round, sender, direction and form.

        ``received=True`` keeps envelopes a member received, ``False`` those a member sent.
        """
        out = []
        mine = set(self.members)
        for r in self._records:
            if tag is not None and not fnmatch.fnmatchcase(r.tag, tag):
                continue
            if round is not None and r.round != round:
                continue
            if sender is not None and r.sender != sender:
                continue
            if received is not None and (r.receiver in mine) != received:
                continue
            if form is not None and r.form is not form:
                continue
            out.append(r)
        return out

    def tags(self) -> list[str]:
        return sorted({r.tag for r in self._records})

    def readable(self, rec: Record) -> bool:
        """Whether the adversary can decode ``rec`` (readable form and bytes kept)."""
        return rec.form in READABLE and rec.payload is not None and not rec.is_error

    def decode(self, rec: Record) -> dict[str, torch.Tensor] | None:
        """The tensors of a readable record, or ``None`` (unreadable, or not a tensor message)."""
        if rec.index in self._cache:
            return self._cache[rec.index]
        out: dict[str, torch.Tensor] | None = None
        if self.readable(rec):
            assert rec.payload is not None
            try:
                out = decode_tensors(rec.payload)
            except CodecError:
                out = None  # e.g. a protocol message that is not a tensor payload
        self._cache[rec.index] = out
        return out

    def missing_payloads(self, tag: str, rounds: Iterable[int] | None = None) -> bool:
        """True if the view has readable-form records of ``tag`` (in ``rounds``, if given) whose
        bytes were not kept."""
        wanted = None if rounds is None else set(rounds)
        return any(r.form in READABLE and r.payload is None and (wanted is None or r.round in wanted)
                   for r in self.records(tag))

    def forms(self, tag: str) -> set[Form]:
        """Forms in which the adversary received ``tag``."""
        return {r.form for r in self.records(tag, received=True)}

    # ------------------------------------------------------------------------- own state
    def own_state(self, pid: str, key: str, default: Any = None) -> Any:
        """A member's own private state entry (its own decrypted relay items, its own models).

        Raises:
            PermissionError: ``pid`` is not an adversary member.
        """
        if pid not in self.members:
            raise PermissionError(f"{pid} is not part of the adversary {self.members}; its state is private")
        party = self._parties.get(pid)
        return default if party is None else party.state.get(key, default)

    @property
    def clients(self) -> tuple[str, ...]:
        return tuple(p for p in self.members if p.startswith("client/"))

    def __repr__(self) -> str:
        return f"AdversaryView(members={list(self.members)}, records={len(self._records)})"


__all__ = ["READABLE", "AdversaryView"]
