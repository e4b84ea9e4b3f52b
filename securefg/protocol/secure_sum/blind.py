"""The ``blind_sum`` mechanism: a ``shared_sum`` whose result only the clients can read.

For "aggregate, then broadcast back" tags (FedStruct's summed Hop2Vec gradient): the sum is
meant for the clients, so the server should not learn it. Each client adds, on top of its
SecAgg+ masks, a blinding mask :math:`\\mathrm{PRG}(g_u)` whose seed it derives from a group
key that all clients hold and the server never sees (:mod:`.group_key`). The server runs
SecAgg+ as for ``aggregate`` (dropouts included) and so removes every pairwise and self mask,
but what is left is :math:`\\sum_{u \\in U} q(x_u) + \\mathrm{PRG}(g_u)`: uniform in the ring to
anyone without the key. It sends that and the survivor list :math:`U` to every client
(``Form.MASKED``); each client subtracts the survivors' blindings and decodes the sum.

**Who learns what.** The server: everything ``secure_sum`` shows it (public keys, masked
inputs, the survivor set) except the sum. Every client: the sum, as under ``secure_sum``.
Dropouts: a survivor's blinding is removable by any key holder, so the result decodes for any
survivor set SecAgg+ accepts. **Cannot protect**: a server colluding with one client (who holds
the key) learns the sum; a malicious server may send a wrong survivor list or corrupt the sum
(clients check the list is known, unique and of at least two; they cannot check the sum).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from securefg.errors import InvalidInputError
from securefg.federation.envelope import Form
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, SumOutcome, register_mechanism
from securefg.protocol.secure_sum.blinded_result import BlindedResult, unblind
from securefg.protocol.secure_sum.group_key import blinding_seed, ensure_group_key, held_key
from securefg.protocol.secure_sum.mechanism import SecureSum
from securefg.protocol.shared_result import send_to_clients


@register_mechanism
class BlindSum(SecureSum):
    """SecAgg+ with a client-held blinding: the clients learn the sum, the server does not.

    Parameters as for :class:`~securefg.protocol.secure_sum.SecureSum` (ring, clip,
    resolution, threshold, dropouts); ``relay_sum`` does not apply (there is no peer sum).
    """

    name = "blind_sum"
    exchanges = frozenset({ExchangeKind.SHARED_SUM})
    protects = ("each input and the sum: the server sees masked inputs and a sum blinded under the clients' "
                "group key; every client learns the sum over survivors")

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        clients = tuple(sorted(inputs))
        if len(clients) < 2:
            raise InvalidInputError(f"{call.tag!r}: a blind sum needs at least two clients")
        ensure_group_key(call, clients)
        session = call.transport.session
        blinds = {}
        for pid in clients:  # acting as each client: its own blinding seed
            key = held_key(call, pid)
            if key is not None:
                blinds[pid] = blinding_seed(key, session=session, round=call.round, tag=call.tag, client=pid)
        agg = self._run(call, call.server, inputs, blinds=blinds)
        assert agg.ring_total is not None
        bits = self.settings.ring_bits(len(clients))
        payload = BlindedResult(len(clients), bits, agg.contributors, agg.ring_total).encode()
        got = send_to_clients(call, clients, payload, form=Form.MASKED)  # acting as the server
        out = {}
        for pid, data in got.items():  # acting as each client: unblind
            key = held_key(call, pid)
            if key is None:
                continue  # it was offline at key setup; it cannot read this result
            total = unblind(BlindedResult.decode(data), key=key, settings=self.settings, session=session,
                            round=call.round, tag=call.tag, clients=clients)
            out[pid] = SumOutcome(total, agg.contributors)
        return out
