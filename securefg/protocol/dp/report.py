"""The run-level privacy report the runner writes into ``result.json``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from securefg.errors import InvalidInputError, UnboundTagError
from securefg.federation.party import Party, is_client
from securefg.protocol.dp.accountant import ACCOUNTANTS, STATE_KEY, PrivacyAccountant, Unit
from securefg.protocol.mechanism import mechanism_class
from securefg.protocol.stack import ProtocolStack

_NOTES = (
    (
        "epsilon: what anyone who sees the released values (e.g. the broadcast model) can learn "
        "about one client; the headline figure."
    ),
    (
        "epsilon_vs_aggregator: what the party receiving the uploads can learn; null means "
        "unbounded (central noise is added by the aggregator after it saw the exact sum)."
    ),
    (
        "unit 'client': neighbouring runs differ in one client's whole contribution; unit "
        "'example': in one training example of that client (DP-SGD). Units are not composed."
    ),
    "a sample_rate below 1 assumes Poisson, secret client sampling.",
)


def privacy_report(
    parties: Mapping[str, Party],
    *,
    delta: float = 1e-5,
    stack: ProtocolStack | None = None,
    accountants: tuple[str, ...] = ACCOUNTANTS,
) -> dict[str, Any]:
    """(epsilon, delta) per client for a whole run, merged from every party's accountant.

    Args:
        parties (Mapping[str, Party]): Every party of the run (their private DP ledgers are
            read, as a checkpoint would; nothing is sent).
        delta (float): Target delta; keep it below 1 / (number of clients). (default: ``1e-5``)
        stack (ProtocolStack, optional): The stack that ran. With it, tags carried by a
            mechanism that hides individual inputs get the sum's noise in the aggregator view;
            without it that view assumes the aggregator saw every upload (conservative).
        accountants (tuple[str, ...]): Opacus accountants to run, the first one giving the
            headline; add ``"prv"`` for the tighter PRV figure where it is affordable.
            (default: ``("rdp",)``)

    Returns:
        dict: JSON-ready, and empty when no party recorded any DP release (a stack without
        DP). ``epsilon`` is the largest client-level epsilon over clients by the first
        accountant (``None``, with a note, if unbounded or nothing was released); ``clients``
        maps each client to its epsilons per unit and view and its releases; ``notes``
        explains them.
    """
    if not accountants:
        raise InvalidInputError("privacy_report needs at least one accountant name")
    ledgers = [p.state.get(STATE_KEY) for p in parties.values()]
    combined = PrivacyAccountant.combined(a for a in ledgers if isinstance(a, PrivacyAccountant))
    if not combined.releases():
        return {}
    hidden = set()
    if stack is not None:
        for tag in {r.tag for r in combined.releases(unit=Unit.CLIENT)}:
            try:
                binding = stack.binding_for(tag)
            except UnboundTagError:  # not an exchange of this stack: nothing is hidden
                continue
            if not mechanism_class(binding.mechanism).reveals_individual_inputs:
                hidden.add(tag)
    body = combined.report(delta=delta, hidden_tags=hidden, accountants=accountants)
    clients = {pid: v for pid, v in body["subjects"].items() if is_client(pid)}
    headline = [v["client"]["epsilon"][accountants[0]] for v in clients.values() if "client" in v]
    notes = list(_NOTES)
    if not headline:
        notes.insert(0, "no client-level DP release was recorded: no client-level guarantee is claimed.")
    elif None in headline:
        notes.insert(0, "some client's epsilon is unbounded: a release carried no noise.")
    return {
        "epsilon": None if not headline or None in headline else max(headline),
        "delta": delta,
        "accountant": accountants[0],
        "stack": stack.name if stack is not None else None,
        "clients": clients,
        "notes": notes,
    }
