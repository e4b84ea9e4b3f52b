"""Audits: threat models -> attacks on a run (audited stack and plaintext) -> reports and exit codes.

* :mod:`.threat_model` -- TOML threat models, validated into frozen dataclasses.
* :mod:`.ledger` -- the exposure ledger (who reads which tag, in what form): the transcript for who
  received what, the mechanisms' exposure declarations (:mod:`securefg.protocol.exposure`) for who reads.
* :mod:`.auditor` -- runs the method under both stacks and the attacks on each.
* :mod:`.report` -- :class:`AuditReport`, validated, round-trips through ``audit.json``.
* :mod:`.render` -- ``report.md`` and ROC plots; :mod:`.protections` -- mechanisms' limits.
* :mod:`.exit_codes` -- documented exit codes; :mod:`.command` -- ``securefg audit``.
"""

from securefg.audit.exit_codes import HELP, AuditExit, help_text
from securefg.audit.ledger import LedgerRow, exposure_ledger
from securefg.audit.report import AttackEntry, AuditReport
from securefg.audit.threat_model import Adversary, AttackSpec, Behaviour, SideKnowledge, ThreatModel

__all__ = [
    "HELP", "Adversary", "AttackEntry", "AttackSpec", "AuditExit", "AuditReport", "Behaviour", "LedgerRow",
    "SideKnowledge", "ThreatModel", "exposure_ledger", "help_text",
]
