"""Attack harnesses: measured leakage from exactly what an adversary saw (its transcript view).

Shaped like PyG's ``torch_geometric.explain``: the orchestrator (:class:`AttackHarness`), the
algorithms (one module per attack, each declaring ``supports()`` and reading only an
:class:`AdversaryView`), their configuration (:mod:`securefg.audit.threat_model`) and the metrics
(:mod:`securefg.attacks.metrics`, pure functions) are separate.

Built-in attacks (``available_attacks()``):

* ``link_stealing``: edges from the similarity of a held model's posteriors (AUC).
* ``structure_link``: remote edges from FedStruct-B's Algorithm 3 messages or result (AUC).
* ``nsf_link``: edges from FedStruct's shared NSFs or the broadcast summed NSF gradient (AUC).
* ``diffusion_membership``: was a graph in another CeFGC client's generator set (AUC, TPR@1%FPR).
* ``partner_recovery``: CeFGC+'s ``2 * mix - own`` copy of a peer's generator (recovery).
* ``label_inference``: which classes a client over-represents, from its output-layer update (AUC).
* ``feature_support``: which features occur in a client's data, from its first-layer update (AUC).
* ``update_poisoning``, ``spoofed_generator``: malicious clients' damage to honest clients (accuracy drop).
* ``crafted_nsf``: a malicious FedStruct-B owner relaying out-of-range or id-spoofing NSF rows (accuracy drop).
* ``malformed_payloads``: crafted payloads a receiver accepts (acceptance rate).
"""

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    AuditContext,
    Challenge,
    GroundTruth,
    Knowledge,
    PublicRun,
    Support,
    attack_class,
    available_attacks,
    register_attack,
)
from securefg.attacks.harness import AttackHarness, AttackResult
from securefg.attacks.view import AdversaryView

__all__ = [
    "AdversaryContext",
    "AdversaryView",
    "Attack",
    "AttackHarness",
    "AttackOutcome",
    "AttackResult",
    "AuditContext",
    "Challenge",
    "GroundTruth",
    "Knowledge",
    "PublicRun",
    "Support",
    "attack_class",
    "available_attacks",
    "register_attack",
]
