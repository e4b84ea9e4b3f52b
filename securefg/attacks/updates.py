"""Model updates an adversary can reconstruct from its view (for the reconstruction probes).

Methods that average models send, per round, a *reference* model (``fedavg/model``, CeFGC's
``cefgc/init``) and take an ``aggregate`` of per-client vectors (``fedavg/update``: weights after
minus before local training; ``cefgc/weights``: trained weights minus W0). The exchange
flattens each client's tensors, multiplies by its public weight and appends the weight, so a
plaintext upload reveals ``(w_k * x_k, w_k)`` and the layout (names, shapes) is the public
architecture, read from the reference model's own payload.

What each adversary can reconstruct, best first:

1. **individual**: a readable upload of client ``k`` (plaintext stack, the receiver is in the
   adversary) gives ``x_k`` exactly;
2. **mean**: the round's weighted mean, when the adversary holds it: from every upload (plaintext),
   from two consecutive broadcasts (FedAvg: ``model_{r+1} - model_r``, so every *client* holds the
   mean update too), or, for the server, from the aggregated model in its own state at the end.
   The same estimate then stands for every client.

Between the two, **subgroup**: under ``subgroup_robust`` (``--option robust=...``) the server
learns each public subgroup's sum; its mean stands for every member of the subgroup.

Not modelled: colluding clients subtracting their own masked inputs from the mean (``K - 1``
colluders recover the last client's update exactly under any secure sum); their inputs to a
masked sum are not in the transcript.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from securefg.attacks.view import AdversaryView
from securefg.federation.flatten import Layout, unflatten


@dataclass(frozen=True)
class UpdateProfile:
    """Tags of a model-averaging method.

    Args:
        model_tag (str): Broadcast of the model every client starts from.
        update_tag (str): The aggregate of per-client vectors.
        update_is_delta (bool): The vector is ``new - reference`` (else the new weights).
        model_key (str): Where the server keeps the aggregated model in its state.
    """

    model_tag: str
    update_tag: str
    update_is_delta: bool
    model_key: str = "model"
    gradient: bool = False
    """The upload is a gradient (FedSGD): the update direction is its negative, and the upload
    may carry trailing non-model entries (FedStruct's ∇S) after the model's layout."""
    not_model: frozenset[str] = frozenset()
    """Broadcast entries that are not model parameters."""
    head: str = ""
    """Prefix of the parameters whose output layer carries the client's *own* labels (FedStruct:
    the feature branch ``f.``; in the hardened variant ``g``'s gradient mixes every receiver's
    residuals through the owner's peer sum)."""
    weighted: bool = True
    """The upload ends with the client's public weight (``aggregate``); ``False``: the vector alone
    (``personalized_aggregate``, FED-PUB; a plain unweighted sum, FedStruct's gradients)."""
    initial_only: bool = False
    """Only the initial model is broadcast (FED-PUB: later each client starts from its own mix),
    so every round's update is measured from it: the change since initialisation."""


PROFILES = (
    UpdateProfile("fedavg/model", "fedavg/update", True),
    UpdateProfile("cefgc/init", "cefgc/weights", True),
    UpdateProfile("fedstruct/model", "fedstruct/update", True, model_key="", gradient=True,
                  not_model=frozenset({"num_labeled", "nsf_grad"}), head="f.", weighted=False),
    UpdateProfile("fedpub/model", "fedpub/weights", False, model_key="", weighted=False, initial_only=True),
)


def round_payloads(rounds: list[int]) -> tuple[str, ...]:
    """Payload globs for probes reading ``rounds`` (``[]`` = all): each profile's reference model
    at ``r`` and ``r + 1`` (the mean from consecutive broadcasts) and the uploads at ``r``."""
    if not rounds:
        return tuple(t for p in PROFILES for t in (p.model_tag, p.update_tag))
    out = []
    for p in PROFILES:
        for r in rounds:
            out += [f"{p.model_tag}@{r}", f"{p.model_tag}@{r + 1}", f"{p.update_tag}@{r}"]
    return tuple(out)

Tensors = dict[str, torch.Tensor]


def profile_for(tags: list[str]) -> UpdateProfile | None:
    """The profile whose update tag appears in ``tags``."""
    for p in PROFILES:
        if p.update_tag in tags:
            return p
    return None


class UpdateSource:
    """Per-round reference models and per-client update estimates from one adversary view.

    Args:
        view (AdversaryView): The adversary's view (payloads of both tags must have been kept).
        profile (UpdateProfile): The method's tags.
    """

    def __init__(self, view: AdversaryView, profile: UpdateProfile) -> None:
        self.view = view
        self.profile = profile
        self._refs: dict[int, Tensors] = {}
        for rec in view.records(profile.model_tag):
            if rec.round in self._refs:
                continue
            t = view.decode(rec)
            if t is not None:
                self._refs[rec.round] = {k: v.double() for k, v in t.items() if k not in profile.not_model}
        self.layout = Layout.of(next(iter(self._refs.values()))) if self._refs else None

    @property
    def rounds(self) -> list[int]:
        """Rounds with a readable reference model (``initial_only``: with a readable upload)."""
        if self.profile.initial_only:
            if not self._refs:
                return []
            return sorted({rec.round for rec in self.view.records(self.profile.update_tag) if self.view.readable(rec)})
        return sorted(self._refs)

    def reference(self, r: int) -> Tensors | None:
        if self.profile.initial_only and self._refs:
            return self._refs[min(self._refs)]
        return self._refs.get(r)

    def individual(self, r: int, cid: str) -> Tensors | None:
        """Client ``cid``'s update at round ``r``, if one of its uploads is readable."""
        if self.layout is None:
            return None
        for rec in self.view.records(self.profile.update_tag, round=r, sender=cid):
            t = self.view.decode(rec)
            if t is None or set(t) != {"x"}:
                continue
            size, extra = t["x"].numel(), int(self.profile.weighted)
            if size != self.layout.size + extra and not (self.profile.gradient and size > self.layout.size + 1):
                continue
            vec = t["x"].double() if extra else torch.cat([t["x"].double(), torch.ones(1, dtype=torch.float64)])
            w = float(vec[-1])
            if w <= 0:
                continue
            if self.profile.gradient:  # model gradients first, then trailing entries (∇S); step = -gradient
                return unflatten(-vec[: self.layout.size] / w, _f64(self.layout))
            return self._as_delta(r, unflatten(vec[:-1] / w, _f64(self.layout)))
        return None

    def mean(self, r: int, clients: tuple[str, ...]) -> Tensors | None:
        """The round's mean update as far as the adversary holds it (see the module docs)."""
        ups = [u for u in (self.individual(r, c) for c in clients) if u is not None]
        if ups and len(ups) == len(clients):
            return {k: torch.stack([u[k] for u in ups]).mean(0) for k in ups[0]}
        ref, nxt = self._refs.get(r), self._refs.get(r + 1)
        if self.profile.update_is_delta and ref is not None and nxt is not None:
            return {k: nxt[k] - ref[k] for k in ref}
        if self.profile.model_key and "server" in self.view.members and ref is not None and r == max(self._refs):
            model = self.view.own_state("server", self.profile.model_key)
            if model is not None and hasattr(model, "state_dict"):
                sd = {k: v.detach().double().cpu() for k, v in model.state_dict().items() if v.is_floating_point()}
                if set(sd) == set(ref):
                    return {k: sd[k] - ref[k] for k in ref}
        return None

    def subgroup(self, r: int, cid: str) -> Tensors | None:
        """The mean update of ``cid``'s subgroup at round ``r``, if the server released it to the adversary."""
        if self.layout is None or "server" not in self.view.members:
            return None
        mech = self.view.own_state("server", "mech/subgroup_robust") or {}
        rel = mech.get("released", {}).get((self.profile.update_tag, r))
        if rel is None:
            return None
        for members, total in zip(rel.contributors, rel.sums):
            if cid not in members:
                continue
            d = float(total[-1]) if rel.weighted else float(len(members))
            if d <= 0:
                return None
            values = total[: self.layout.size].double() / d
            if self.profile.gradient:
                return unflatten(-values, _f64(self.layout))
            return self._as_delta(r, unflatten(values, _f64(self.layout)))
        return None

    def estimate(self, r: int, cid: str, clients: tuple[str, ...]) -> tuple[Tensors | None, str]:
        """Best estimate of ``cid``'s update at round ``r`` and its kind
        (``individual``/``subgroup``/``mean``/``none``)."""
        ind = self.individual(r, cid)
        if ind is not None:
            return ind, "individual"
        sub = self.subgroup(r, cid)
        if sub is not None:
            return sub, "subgroup"
        m = self.mean(r, clients)
        return (m, "mean") if m is not None else (None, "none")

    def _as_delta(self, r: int, x: Mapping[str, torch.Tensor]) -> Tensors:
        if self.profile.update_is_delta:
            return dict(x)
        ref = self.reference(r)
        assert ref is not None
        return {k: x[k].double() - ref[k] for k in ref}


def _f64(layout: Layout) -> Layout:
    return Layout(tuple((n, s, torch.float64) for n, s, _ in layout.fields))


def output_layer(tensors: Mapping[str, torch.Tensor]) -> tuple[str, str] | None:
    """Names of the last linear layer's ``(weight, bias)`` (the classifier head)."""
    names = list(tensors)
    for name in reversed(names):
        w = tensors[name]
        if name.endswith("weight") and w.dim() == 2:
            bias = name[: -len("weight")] + "bias"
            if bias in tensors and tensors[bias].shape == (w.shape[0],):
                return name, bias
    return None


def input_layer(tensors: Mapping[str, torch.Tensor], num_features: int) -> str | None:
    """Name of the first weight that reads the node features (``[hidden, num_features]``)."""
    for name, w in tensors.items():
        if name.endswith("weight") and w.dim() == 2 and w.shape[1] == num_features:
            return name
    return None


__all__ = ["PROFILES", "UpdateProfile", "UpdateSource", "input_layer", "output_layer", "profile_for"]
