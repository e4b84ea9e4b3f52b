"""What each shipped stack's description says about who reads each tag, pinned by quotation.

One entry per (stack, tag): the sentences of the stack's ``description`` that say who reads the
tag's payload, and the roles they name (``server``, ``client``, ``keyholder``, ``shuffler``).
The agreement test checks that every quotation still stands in the description (whitespace
aside) and that the roles it names are exactly those the exposure ledger lists as readers in a
run, so a description and a ledger cannot drift apart silently: edit one, and the test names the
other. ``EVERY_RECEIVER`` stands for "whoever receives the tag reads it" (the plaintext stack).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Described:
    """What a description says of one tag.

    Args:
        quotes (tuple[str, ...]): Sentences (or parts) of the description saying who reads it.
        readers (frozenset[str] | None): The roles they say read it; ``None``: every receiver.
    """

    quotes: tuple[str, ...]
    readers: frozenset[str] | None


EVERY_RECEIVER = None
S, C, K = frozenset({"server"}), frozenset({"client"}), frozenset({"server", "keyholder"})


def d(readers: frozenset[str] | None, *quotes: str) -> Described:
    return Described(tuple(quotes), readers)


_FEDSTRUCT_SECURE = {
    "fedstruct/abar": d(C, "i learns only the sum over its peers of each hop (never a single B_ik)"),
    "fedstruct/edge_rr": d(C, "fedstruct/edge_rr (method option edge_dp_epsilon): client k < l sends l its "
                              "randomized-response reports of the pairs between them through a peer sum to l; "
                              "l alone reads them, the server relays masked vectors"),
    "fedstruct/boundary": d(C, "fedstruct/boundary (abar_rows = \"boundary\"): each client's mask of its boundary "
                               "rows is sealed end to end to the other clients, which read it; the server routes "
                               "boxes it cannot open"),
    "fedstruct/nsf": d(C, "NSFs are sealed end to end among clients (the server routes boxes it cannot open)"),
    "fedstruct/count": d(S, "gradients (fedstruct/update), metric counts (fedstruct/metrics) and the "
                            "labelled-node count (fedstruct/count) are summed by SecAgg+, so the server learns "
                            "only the sums"),
    "fedstruct/update": d(S, "gradients (fedstruct/update), metric counts (fedstruct/metrics) and the "
                             "labelled-node count (fedstruct/count) are summed by SecAgg+, so the server learns "
                             "only the sums"),
    "fedstruct/metrics": d(S, "gradients (fedstruct/update), metric counts (fedstruct/metrics) and the "
                              "labelled-node count (fedstruct/count) are summed by SecAgg+, so the server learns "
                              "only the sums"),
    "fedstruct/model": d(C, "theta is broadcast in the clear"),
    "fedstruct/nsf_grad": d(C, "the summed NSF gradient (meant for the clients, who step S with it)",
                            "the server relays the sum blinded and never reads it (fedstruct/nsf_grad)"),
    "fedstruct/nse": d(C, "Variant A: the server holds the graph and sends each client its NSE rows point to point."),
    "fedstruct/hardened/abar_cols": d(C, "H0 blocks of A-bar go point to point to their column owner "
                                         "(authenticated, readable by that owner)"),
    "fedstruct/hardened/nse": d(C, "structure answers and their gradients are peer sums"),
    "fedstruct/hardened/nse_grad": d(C, "structure answers and their gradients are peer sums"),
}

_AS_IN_FEDSTRUCT_SECURE = "Every other tag as in fedstruct_secure."

_COUNTS_SUMMED = ("Metric counts (fedstruct/metrics) and the labelled-node count (fedstruct/count) are summed by "
                  "SecAgg+, so the server learns only the sums")
_FEDSTRUCT_SECURE_ROBUST = {
    **{t: v for t, v in _FEDSTRUCT_SECURE.items() if t not in ("fedstruct/update", "fedstruct/nsf_grad",
                                                                 "fedstruct/count", "fedstruct/metrics")},
    "fedstruct/count": d(S, _COUNTS_SUMMED),
    "fedstruct/metrics": d(S, _COUNTS_SUMMED),
    "fedstruct/update": d(K, "the server learns the kept clients' sum and which clients were dropped",
                          "The key holder learns the pseudonymous sketches' norms and pairwise distances"),
    "fedstruct/nsf_grad": d(frozenset({"client", "keyholder"}),
                            "the server relays the sum blinded and never reads it (fedstruct/nsf_grad); every client "
                            "checks the unblinded sum against the key holder's sketch sum, sealed to it",
                            "the sketch of the kept gradients' sum"),
}

_FEDSHEAFHN_SECURE = {
    "fedsheafhn/embedding": d(S, "The server reads every embedding x_i and every update Delta omega~_i under a "
                                 "pseudonym it cannot link to a client; the shuffler learns pseudonym -> client but "
                                 "reads nothing."),
    "fedsheafhn/feedback": d(S, "The server reads every embedding x_i and every update Delta omega~_i under a "
                                "pseudonym it cannot link to a client; the shuffler learns pseudonym -> client but "
                                "reads nothing."),
    "fedsheafhn/weights": d(C, "the shuffler forwards it to that pseudonym's owner, the only party that can open it."),
    "fedsheafhn/metrics": d(S, "fedsheafhn/metrics: validation/test accuracies through SecAgg+; the server learns "
                               "the means."),
    "fedsheafhn/warm_start": d(S, "the server learns their mean (one FedAvg round's worth)"),
}

_AS_IN_FEDSHEAFHN_SECURE = ("fedsheafhn/weights, fedsheafhn/feedback, fedsheafhn/metrics, fedsheafhn/warm_start: "
                            "as in fedsheafhn_secure.")

_FEDPUB_CKKS = {
    "fedpub/model": d(C, "fedpub/model: the random initial model, broadcast once in the clear (public by design)."),
    "fedpub/embedding": d(K, "the keyholder decrypts only the permuted multiset of cosines",
                          "The server learns the cosine matrix S"),
    "fedpub/weights": d(C, "sends sum_j alpha_ij Enc(theta_j) to i alone, which decrypts its own mix."),
    "fedpub/metrics": d(K, "fedpub/metrics: validation/test accuracies summed under CKKS; the keyholder decrypts "
                           "the sum and the server learns the mean."),
}

_FEDAVG_SAGE = "fedavg/update, fedavg/metrics: GraphSage updates and validation/test accuracies through SecAgg+; " \
               "the server learns the uniform mean."

DESCRIBED: dict[str, dict[str, Described]] = {
    "plaintext": {"*": d(EVERY_RECEIVER, "Every message in the clear")},
    "cefgc": {
        "cefgc/model": d(C, "the server routes and CSPRNG-shuffles boxes it cannot open and forwards each client "
                            "the other clients' packages", "the recipients read the generators"),
        "cefgc/init": d(C, "R2 also carries the GIN initialisation W0 in the clear (public by design)."),
        "cefgc/weights": d(S, "the trained GIN weights' changes from W0 go through SecAgg+ (secure_sum): the server "
                              "learns only their mean"),
    },
    "cefgc_robust": {
        "cefgc/model": d(C, "the server routes and CSPRNG-shuffles boxes it cannot open", "the recipients read the generators"),
        "cefgc/init": d(C, "W0 is broadcast in the clear (public by design)"),
        "cefgc/weights": d(K, "The server learns the kept clients' mean and which clients were dropped; the key holder "
                              "learns the pseudonymous sketches' norms and pairwise distances."),
    },
    "cefgc_plus": {
        "cefgc/model": d(C, "(each client holds the secret key and decrypts)"),
        "cefgc/similarity": d(K, "the keyholder decrypts only the permuted multiset of cosines",
                              "the server learns the cosine matrix"),
        "cefgc/init": d(C, "plus W0 in the clear."),
        "cefgc/weights": d(K, "the keyholder decrypts the sum only and hands it to the server, which learns the mean."),
    },
    "fedavg_ckks": {
        "fedavg/model": d(C, "The global model is broadcast in the clear."),
        "fedavg/update": d(K, "learns the weighted sums, flooded with 2^-20 Gaussian noise by the key holder (the "
                              "lowest-numbered client, or a 'keyholder' party when present), which learns the same "
                              "sums."),
        "fedavg/metrics": d(K, "learns the weighted sums, flooded with 2^-20 Gaussian noise by the key holder (the "
                               "lowest-numbered client, or a 'keyholder' party when present), which learns the same "
                               "sums."),
    },
    "fedavg_robust": {
        "fedavg/model": d(C, "the global model is broadcast in the clear."),
        "fedavg/update": d(K, "The server learns the mean of the kept updates and which clients were dropped; the key "
                              "holder learns the pseudonymous updates' norms and pairwise distances (as the sketches "
                              "keep them) and their sample counts."),
        "fedavg/metrics": d(K, "Metrics are summed under CKKS too (the key holder decrypts the sums for the server)"),
    },
    "fedavg_dp": {
        "fedavg/model": d(C, "the global model the server broadcasts"),
        "fedavg/update": d(S, "the server, which receives every clipped update in plaintext"),
        "fedavg/metrics": d(S, "fedavg/metrics (each client's validation and test accuracy) reaches the server in "
                               "plaintext, without noise"),
    },
    "fedavg_secure_robust": {
        "fedavg/model": d(C, "the global model is broadcast in the clear."),
        "fedavg/update": d(K, "The server learns the kept clients' weighted sum (and weight total) and which clients "
                              "were dropped; the key holder learns the pseudonymous sketches' norms and pairwise "
                              "distances and their sample counts."),
        "fedavg/metrics": d(S, "Metrics are summed through SecAgg+"),
    },
    "fedavg_secure_sum": {
        "fedavg/model": d(C, "The global model is broadcast in the clear: it is public to every client by design."),
        "fedavg/update": d(S, "the server learns only the weighted sum over the clients that survived the round"),
        "fedavg/metrics": d(S, "every client update and evaluation metric summed through SecAgg+ (secure_sum): the "
                               "server learns only the weighted sum"),
    },
    "fedpub_ckks": _FEDPUB_CKKS,
    "fedpub_dp": {
        "fedpub/model": d(C, "fedpub/model: as in fedpub_ckks (the random initial model, broadcast in the clear)."),
        "fedpub/embedding": d(S, "the server computes cosines from the noised vectors"),
        "fedpub/weights": d(C, "fedpub/weights and fedpub/metrics: as in fedpub_ckks"),
        "fedpub/metrics": d(K, "fedpub/weights and fedpub/metrics: as in fedpub_ckks"),
    },
    "fedsage_secure": {
        "fedsage/generated": d(C, "the server routes boxes it cannot open",
                               "every owner opens its peers' generated features"),
        "fedsage/feature_grad": d(C, "i learns their sum over its M - 1 peers"),
        "fedavg/update": d(S, _FEDAVG_SAGE),
        "fedavg/metrics": d(S, _FEDAVG_SAGE),
        "fedavg/model": d(C, "fedavg/model: the global model, broadcast in the clear."),
    },
    "fedsheafhn_secure": _FEDSHEAFHN_SECURE,
    "fedsheafhn_dp": {
        "fedsheafhn/embedding": d(S, "the server only ever holds the noised vector"),
        **{t: d(v.readers, _AS_IN_FEDSHEAFHN_SECURE) for t, v in _FEDSHEAFHN_SECURE.items() if t != "fedsheafhn/embedding"},
    },
    "fedsheafhn_feedback_dp": {
        "fedsheafhn/embedding": d(S, "the server only ever holds the noised vector"),
        "fedsheafhn/feedback": d(S, "the server only ever holds the noised update"),
        "fedsheafhn/weights": d(C, "only its owner opens it (as in fedsheafhn_secure)"),
        "fedsheafhn/metrics": d(S, "through SecAgg+, the server learns the means"),
        "fedsheafhn/warm_start": d(S, "through SecAgg+, the server learns the means"),
    },
    "fedsage_dp": {
        "fedsage/generated": d(C, "every peer opens only the noised vectors"),
        "fedsage/feature_grad": d(C, "fedsage/feature_grad, fedavg/update, fedavg/metrics, fedavg/model: as in "
                                     "fedsage_secure"),
        "fedavg/update": d(S, "fedavg/update, fedavg/metrics: the server learns the uniform mean (SecAgg+)"),
        "fedavg/metrics": d(S, "fedavg/update, fedavg/metrics: the server learns the uniform mean (SecAgg+)"),
        "fedavg/model": d(C, "the global model is public to the owners"),
    },
    "fedsage_dp_robust": {
        "fedsage/generated": d(C, "every peer opens only the noised vectors"),
        "fedsage/feature_grad": d(C, "fedsage/feature_grad: owner i learns only the sum over its peers (SecAgg+)."),
        "fedavg/update": d(K, "The server learns the bounded mean and each owner's coefficient (whether it was "
                              "scaled, by how much); the key holder learns the pseudonymous sketches' norms and "
                              "pairwise distances and their sample counts."),
        "fedavg/metrics": d(S, "fedavg/metrics: the server learns the uniform mean (SecAgg+)."),
        "fedavg/model": d(C, "The global model is public to the owners."),
    },
    "fedstruct_secure": _FEDSTRUCT_SECURE,
    "fedstruct_secure_robust": _FEDSTRUCT_SECURE_ROBUST,
    "fedstruct_abar_dp": {
        "fedstruct/abar": d(C, "what each client receives by design, its rows of A-bar"),
        **{t: d(v.readers, _AS_IN_FEDSTRUCT_SECURE) for t, v in _FEDSTRUCT_SECURE.items() if t != "fedstruct/abar"},
    },
}
"""Stack name (as its ``name`` field says) -> tag -> what its description says."""


def described(stack: str, tag: str) -> Described | None:
    """The entry for ``tag`` in ``stack`` (an exact tag first, then the stack's ``"*"``)."""
    table = DESCRIBED.get(stack, {})
    return table.get(tag) or table.get("*")


def normalized(text: str) -> str:
    """``text`` with every run of whitespace made one space (descriptions wrap at any word)."""
    return " ".join(text.split())
