"""What a method releases *by design*: outputs a receiver needs, which no mechanism can hide.

A mechanism protects a message in transit and its individual inputs; it cannot hide the
result the receiver is meant to read. The report lists these next to the mechanisms, per
method and tag, with the attack that measures each, so a reviewer sees why a budget can be
exceeded under the protected stack. Keyed by method name, then tag glob (first match wins).
"""

from __future__ import annotations

import fnmatch

FEDSTRUCT = {
    "fedstruct/abar": (
        "Client i's peer-sum result, sum over k of B_ik per hop, and so its rows of A-bar, is the output of "
        "Algorithm 3: i reads it by design. The rows are L_s-step random-walk distributions over global node "
        "ids: they rank i's remote neighbours' own neighbours far above other nodes, and with a two-hop A-bar "
        "a row with one remote neighbour is that neighbour's neighbour list (measured by structure_link). "
        "Only DP noise on the messages hides edges, at the cost of the rows themselves."
    ),
    "fedstruct/boundary": (
        "Option abar_rows=boundary (the default): every client learns each other client's boundary rows, which "
        "of its nodes have a neighbour in another client (the row layout of its A-bar peer sums); the server "
        "learns only their count, from the length of the masked sums (and the rows too under plaintext)."
    ),
    "fedstruct/model": (
        "theta is broadcast in the clear: every client needs it to predict, so every client (and the server) "
        "holds the global model (link_stealing)."
    ),
    "fedstruct/nsf_grad": (
        "Hop2Vec: every client receives the summed NSF gradient (it needs it to update S). Its row u is column u "
        "of A-bar weighted by the labelled nodes' residuals, so adjacent nodes get similar rows: edges among "
        "every client's nodes, to every client (nsf_link). Under blind_sum the server relays the sum blinded "
        "under the clients' group key and cannot read it; under secure_sum or plaintext it reads it too."
    ),
    "fedstruct/update": (
        "The server learns only the sum of the gradients (per-client labels and vocabularies stay hidden: "
        "label_inference, feature_support)."
    ),
    "fedstruct/nsf": (
        "Each recipient opens every other owner's NSF rows: degrees (degree), embeddings that place adjacent "
        "nodes close (Node2Vec), or random initial rows that carry nothing (Hop2Vec) (nsf_link)."
    ),
    "fedstruct/hardened/abar_cols": (
        "Owner j reads client i's block A-bar[V_i, V_j] in the clear (App. L.1, H0): i's multi-hop "
        "proximity to j's nodes."
    ),
    "fedstruct/hardened/nse*": (
        "Client i reads the summed structure answers for its own nodes and owner j the summed gradient for "
        "its NSF rows; no NSF row or NSF gradient leaves its owner (nsf_link is blind)."
    ),
    "fedstruct/nse": (
        "Variant A: client i reads its own NSE rows; the server holds the global graph by assumption (A0)."
    ),
}

FEDPUB = {
    "fedpub/embedding": (
        "The server learns the cosine matrix of the clients' functional embeddings (it needs it to weight "
        "the mixes): in the clear from the embeddings under plaintext, as decrypted cosines under CKKS, from "
        "noised embeddings under the DP stack. Under homophily it names the clients whose label distributions "
        "are alike (community_inference); the CKKS key holder sees the same values, shuffled."
    ),
    "fedpub/weights": (
        "Client i decrypts its own mix sum_j alpha_ij theta_j. Knowing its own model, and the weights if the "
        "server discloses them, it holds sum_{j != i} alpha_ij theta_j: a blend of its peers' models in which "
        "no peer weighs more than max_peer_weight (the leakage guard; result.json 'fedpub' reports the largest "
        "weight sent). The server learns the weights it chose and nothing of a model under CKKS."
    ),
    "fedpub/metrics": "The server learns the mean validation and test accuracy over the clients.",
    "fedpub/model": "The random initial model, public by design.",
}

FEDSHEAFHN = {
    "fedsheafhn/feedback": (
        "STRUCTURAL LEAK: the server reads every client's hypernetwork feedback Delta omega~_i (its fine-tuned "
        "GCN layers minus the generated ones) individually, on every stack: the hypernetwork's gradient needs it "
        "per client, and a masked sum would not hide it (sum_i Delta_i h_i^T with known h_i is solvable for each "
        "Delta_i). With the weights it generated, the server rebuilds each client's fine-tuned layers exactly "
        "(update inversion) and reads which words occur in its documents from the first layer (feature "
        "inference); securefg.attacks.sheaf_feedback measures both. The mailbox stack hides only which client "
        "sent which update (session pseudonyms through the shuffler); under fedsheafhn_feedback_dp the server "
        "reads only a clipped, locally noised copy of each update (client-level epsilon in result.json)."
    ),
    "fedsheafhn/embedding": (
        "The server reads every client's graph-level embedding x_i under a session pseudonym (the sheaf model and "
        "the hypernetwork are non-linear per client); under fedsheafhn_dp only a clipped, locally noised copy "
        "(epsilon in result.json). Pseudonyms are stable over the session, so the server links a client's "
        "uploads across rounds, not to its identity."
    ),
    "fedsheafhn/weights": (
        "Client i opens only its own generated weights, a function of every client's embedding through the "
        "sheaf diffusion and the attention matrix: low-bandwidth cross-client information, by design."
    ),
    "fedsheafhn/metrics": "The server learns the mean validation and test accuracy over the clients.",
    "fedsheafhn/warm_start": "With warm_start=secure_mean, the server learns the mean of the clients' GCN layers after "
                             "the round-0 warm-up (as one FedAvg round would), not any single client's layers.",
}

FEDSAGE = {
    "fedavg/model": "The global GraphSage model, broadcast to every owner: public to the owners by design.",
    "fedavg/update": "The server learns only the uniform mean of the owners' GraphSage updates (SecAgg+).",
    "fedavg/metrics": "The server learns the mean validation and test accuracy over the owners.",
}

FEDSAGE_PLUS = {
    **FEDSAGE,
    "fedsage/generated": (
        "UNAVOIDABLE: every owner opens every other owner's generated neighbour features (|B| * num_pred "
        "tanh vectors per federated step, naming the generating owner so the gradient can be routed back): "
        "the peers' nearest-neighbour loss needs them. fGen is trained to emit the owner's hidden neighbours, "
        "so they lie near its nodes (generator_membership). The server sees sealed boxes only; under "
        "plaintext it reads them too. Embeddings and generator weights never leave their owner. Under "
        "fedsage_dp each vector is clipped and noised by its owner before sealing (node-level epsilon in "
        "result.json; the generator's own training is not covered)."
    ),
    "fedsage/feature_grad": (
        "UNAVOIDABLE: owner i reads, per generated vector, the sum over its M - 1 peers of 2 (x~ - x_{u*_j}) / d, "
        "i.e. the sum of the peers' nearest node features: with M = 3 the sum of two rows, which names the "
        "union of their non-zero features (generator_reconstruction, entry_auc) but no single row "
        "(recovery 0). One peer's gradient alone would return its matched rows exactly (plaintext: recovery 1)."
    ),
}

DISCLOSURES: dict[str, dict[str, str]] = {"fedstruct": FEDSTRUCT, "fedpub": FEDPUB, "fedsheafhn": FEDSHEAFHN,
                                          "fedsage": FEDSAGE, "fedsage_plus": FEDSAGE_PLUS}

METHOD_ASSUMPTIONS: dict[str, tuple[str, ...]] = {
    "fedsage_plus": (
        ("FedSage+: owners do not collude. Owner i's gradient sum covers its M - 1 peers; if all but one of them "
         "tell i their own gradients, i subtracts them and reads the last peer's matched rows exactly (with M = 3, "
         "one colluding peer suffices). A peer may answer with crafted gradients (poisoning), which a secure sum "
         "cannot detect."),
    ),
    "fedsheafhn": (
        ("FedSheafHN under the mailbox: the shuffler does not collude with the server (together they map every "
         "pseudonym to its client); the shuffler reads nothing but learns pseudonym -> client."),
    ),
    "fedpub": (
        ("FED-PUB under CKKS: every client holds the secret key of the weights' key session (it decrypts its "
         "own mix), so the server colluding with any client decrypts every upload; non-collusion is assumed."),
    ),
    "fedstruct": (
        ("FedStruct-B: all parties share global node ids and each client knows the owner and id of every "
        "inter-edge endpoint (notes B0; the paper gives no protocol for agreeing on them, e.g. PSI)."),
        ("FedStruct-A trusts the server with the global edge set and every client's labelled set (notes A0): "
        "link attacks against that server are out of scope, not passed."),
    ),
}


#: Released by a mechanism whatever the method: the receiver reads it by design of the mechanism.
MECHANISM_DISCLOSURES: dict[str, str] = {
    "ckks_robust": (
        "ROBUST AGGREGATE: the server learns, besides the robust mean, one coefficient per client: 0 for the "
        "updates multi-Krum dropped (and, with a norm bound, the scale-down of each clipped update). The key "
        "holder learns the Gram matrix (norms, distances, angles) of the pseudonymous updates and their sample "
        "counts."
    ),
    "masked_robust": (
        "ROBUST AGGREGATE: the server learns, besides the kept clients' sum, which updates multi-Krum dropped "
        "(their clients are never asked for a masked input). The key holder learns the Gram matrix (norms, "
        "distances, angles) of the pseudonymous updates' count sketches and their sample counts."
    ),
    "subgroup_robust": (
        "ROBUST OPTION: the server learns one secure sum per public subgroup of >= k clients (and each "
        "subgroup's weight total and survivors), not a single total: G = n // k partial sums per round. "
        "Each client's update hides among its k subgroup members only; k - 1 colluding members plus the "
        "server recover the last one. The subgroups are drawn from the run seed, tag and round, so they "
        "change every round (label_inference and feature_support score each client by its subgroup's mean: "
        "their 'estimate' detail reads 'subgroup')."
    ),
}


def by_mechanism(mechanism: str) -> str:
    """What ``mechanism`` releases to its receiver beyond what the method asks for (empty if nothing)."""
    return MECHANISM_DISCLOSURES.get(mechanism, "")


def _base(method: str) -> str:
    """``fedstruct+sign_flip10@0`` (a malicious rerun) -> ``fedstruct``."""
    return method.split("+", 1)[0]


def by_design(method: str, tag: str) -> str:
    """What ``tag`` releases to its receiver by design in ``method`` (empty if nothing noted)."""
    for pattern, text in DISCLOSURES.get(_base(method), {}).items():
        if fnmatch.fnmatchcase(tag, pattern):
            return text
    return ""


def method_assumptions(method: str) -> tuple[str, ...]:
    return METHOD_ASSUMPTIONS.get(_base(method), ())


__all__ = ["DISCLOSURES", "MECHANISM_DISCLOSURES", "METHOD_ASSUMPTIONS", "by_design", "by_mechanism",
           "method_assumptions"]
