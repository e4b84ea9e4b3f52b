r"""Link inference from FedStruct-B's Algorithm 3: remote edges from the rows of Ā a client gets.

In Algorithm 3 (``securefg.models.fedstruct.abar_protocol``) client ``k`` sends client ``i``,
for hop :math:`\ell`, :math:`B_{i\cdot k} = \tilde{A}_k^{[i]} P_k^{(\ell-1)}` through a
``peer_sum`` (tag ``fedstruct/abar*``). Row :math:`v` of it is :math:`\sum_{w \in N(v) \cap V_k}
P_k^{(\ell-1)}[w]`; at :math:`\ell = 2`, :math:`P^{(1)}[w] = (e_w + \sum_{x \in N(w)} e_x) /
\tilde{d}_w` over *global ids*. So when ``i``'s node ``v`` has a single neighbour ``w`` in
``k``, the row is ``w``'s neighbour list (notes B5.3). The attacker ``i`` knows its own nodes and
its inter-edges ``(v, w)`` (FedStruct-B's assumption) and scores a candidate remote edge
``(w, x)`` by

.. math::
    s(w, x) = \max_{v \in N_i(w)} R[v, x] / |N(v) \cap \text{remote}|

where :math:`R` is the best matrix it holds:

* **individual** (plaintext ``peer_sum``): :math:`R = B_{i\cdot\,\text{owner}(w)}` at hop 2;
* **sum only** (masked ``peer_sum``): its own result :math:`\bar{A}^{[i]}`, kept in its state
  (the protocol's output; no mechanism hides it from its receiver). With the public hop weights
  :math:`\beta` and its own rows :math:`P_i^{(1)}`, it peels :math:`\bar{A}^{[i]}` to
  :math:`\tilde{D}_i(\bar{A}^{[i]} - \beta_1 P_i^{(1)})/\beta_2` (exact for two hops) and
  subtracts its own contribution :math:`B_{i\cdot i}`, leaving the sum over remote neighbours:
  rows with one remote neighbour still leak it exactly; only rows with several are mixed.
  This peeling needs a two-hop Ā (β2 ≠ 0). The method's default Ā = Â^{L_s} (β = e_{L_s}, L_s =
  10 on Cora) cannot be peeled; the attacker then scores with its Ā rows directly,
  :math:`s(w, x) = \max_{v \in N_i(w)} \bar{a}_{vx}`: the L_s-step walk mass from its node
  ``v`` onto ``x``, a proximity that ranks ``w``'s neighbours far above random nodes.

**Metric** (``auc``): ROC-AUC over true edges ``(w, x)`` with ``w`` a remote neighbour of the
attacker and ``x`` any node the attacker does not own, against as many non-edges ``(w, x')``.
0.5 = chance.

The attacker's own graph knowledge and result are read from its own state under the keys
``view_key`` (a :class:`~securefg.models.fedstruct.ClientGraphView`), ``directory_key`` (the
public :class:`~securefg.models.fedstruct.NodeDirectory`), ``betas_key`` and ``abar_key``
(:math:`\bar{A}^{[i]}`): the keys the ``fedstruct`` method (variant B) keeps in each client's
state. ``tests/attacks`` attacks the real method and, for the DP calibration, a bare Algorithm 3
driver with the same keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    Challenge,
    GroundTruth,
    Knowledge,
    PublicRun,
    Support,
    register_attack,
)
from securefg.attacks.link_stealing import feature_similarity


def peelable(betas: list[float]) -> bool:
    """Whether Ā = β1 Â + β2 Â² can be peeled back to the hop-2 sum (no higher hop, β2 ≠ 0).

    The method's default is Ā = Â^{L_s} (β = e_{L_s}, the FedStruct code): for ``L_s > 2``,
    β2 = 0 and Â^{L_s} cannot be inverted to the remote rows, so dividing by β2 (what an
    earlier version did) turned every score into NaN/Inf.
    """
    return 2 <= len(betas) and all(b == 0 for b in betas[2:]) and betas[1] != 0


def peel_two_hops(abar: torch.Tensor, gv: Any, directory: Any, betas: list[float]) -> torch.Tensor:
    r""":math:`\tilde{D}_i(\bar{A}^{[i]} - \beta_1 P_i^{(1)})/\beta_2 - B_{i\cdot i}`: the sum of the
    remote neighbours' hop-1 rows, per own row (exact for a two-hop Ā)."""
    from securefg.models.fedstruct import adjacency_block, init_abar_state

    state = init_abar_state(gv, directory, betas=betas, dtype=torch.float64)
    summed = (abar - betas[0] * state.power) / betas[1] * gv.degree().double().unsqueeze(1)
    own = torch.sparse.mm(adjacency_block(gv, directory, receiver=gv.client_id).double(), state.power)
    return summed - own


@register_attack
class StructureLinkInference(Attack):
    """Infer edges between other clients' nodes from Algorithm 3's messages or its result.

    Args:
        tag (str): Tag glob of the peer sums. (default: ``"fedstruct/abar*"``)
        pairs (int): True remote edges sampled (and as many non-edges). (default: ``2000``)
        view_key, directory_key, betas_key, abar_key (str): Own-state keys (module docs).
        rows_key (str): Own-state key of the attacker's boundary rows, the row layout its peers
            send in under the method's ``abar_rows = "boundary"`` (absent: dense ``[n_i, n]``).
    """

    name = "structure_link"
    metric = "auc"
    metric_doc = "ROC-AUC over remote edges (w, x) next to the attacker's nodes vs non-edges"
    defaults: ClassVar[Mapping[str, Any]] = {"tag": "fedstruct/abar*", "pairs": 2000, "view_key": "graph_view",
                "directory_key": "directory", "betas_key": "betas", "abar_key": "abar", "rows_key": "abar_boundary"}
    payload_tags = ("fedstruct/abar*",)

    @classmethod
    def payloads(cls, params: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
        """Only hop 2's messages (the attack reads no other; all hops of Cora's ten would be ~5 GB)."""
        from securefg.methods.fedstruct.offline import offline_round
        from securefg.methods.fedstruct.settings import OPTION_DEFAULTS

        hops = int(options.get("structure_hops", OPTION_DEFAULTS["structure_hops"]))
        return (f"{params['tag']}@{offline_round(2, hops)}",)

    def supports(self, ctx: AdversaryContext) -> Support:
        if len(ctx.view.clients) != 1:
            return Support(False, "needs exactly one adversarial client (the receiver of its rows of Ā)")
        pid = ctx.view.clients[0]
        if ctx.view.own_state(pid, self.params["view_key"]) is None:
            return Support(False, "the attacker's graph view is not in its state (no FedStruct-B run)")
        if ctx.run.options.get("variant") == "A":
            return Support(False, "FedStruct-A: the server holds Ā; a client receives only its own NSE rows, "
                                  "no Ā rows or peer messages")
        has_msgs = bool(ctx.view.records(self.params["tag"], received=True))
        if not has_msgs and ctx.view.own_state(pid, self.params["abar_key"]) is None:
            return Support(False, f"no {self.params['tag']!r} messages and no Ā rows in the attacker's view")
        return Support(True)

    # ------------------------------------------------------------------------ challenger
    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        pid = adv.view.clients[0]
        gv = adv.view.own_state(pid, self.params["view_key"])
        mine = torch.zeros(int(truth.task.full_graph.num_nodes), dtype=torch.bool)
        mine[gv.nodes] = True
        remote_nb = torch.unique(gv.inter_edges[1])
        ei = truth.task.full_graph.edge_index
        is_w = torch.zeros_like(mine)
        is_w[remote_nb] = True
        pos = ei[:, is_w[ei[0]] & ~mine[ei[1]] & (ei[0] != ei[1])]
        if pos.size(1) > self.params["pairs"]:
            pos = pos[:, torch.randperm(pos.size(1), generator=generator)[: self.params["pairs"]]]
        present = {(int(a), int(b)) for a, b in ei.t().tolist()}
        others = (~mine).nonzero().flatten()
        neg: list[tuple[int, int]] = []
        tries = 0
        while len(neg) < pos.size(1) and tries < 100 * max(pos.size(1), 1):
            tries += 1
            w = int(remote_nb[torch.randint(remote_nb.numel(), (1,), generator=generator)])
            x = int(others[torch.randint(others.numel(), (1,), generator=generator)])
            if x != w and (w, x) not in present:
                neg.append((w, x))
        negt = torch.tensor(neg, dtype=torch.long).t().reshape(2, -1)
        items = torch.cat([pos, negt], 1)
        return Challenge(items, torch.cat([torch.ones(pos.size(1)), torch.zeros(negt.size(1))]))

    def baseline(self, knowledge: Knowledge, run: PublicRun, items: Any) -> torch.Tensor | None:
        """Link inference from the public features alone: the endpoints' feature cosine."""
        return feature_similarity(knowledge, items)

    # ------------------------------------------------------------------------- adversary
    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        pid = adv.view.clients[0]
        gv = adv.view.own_state(pid, self.params["view_key"])
        directory = adv.view.own_state(pid, self.params["directory_key"])
        n_i, n = gv.num_nodes, directory.num_nodes
        individual = self._individual(adv, pid, n_i, n, adv.view.own_state(pid, self.params["rows_key"]))
        rows_by_owner: dict[int, torch.Tensor] = {}
        residual: torch.Tensor | None = None
        proximity: torch.Tensor | None = None
        if individual:
            for sender, vec in individual.items():
                rows_by_owner[int(sender.split("/")[1])] = vec.view(n_i, n)
            self._source = "individual"
        else:
            abar = adv.view.own_state(pid, self.params["abar_key"]).double()
            betas = [float(b) for b in adv.view.own_state(pid, self.params["betas_key"])]
            if peelable(betas):
                residual = peel_two_hops(abar, gv, directory, betas)
                self._source = "own result (sum), peeled"
            else:
                proximity = abar
                self._source = "own result (sum), rows as proximity"
        local = gv.local_rows(gv.inter_edges[0])
        remote, owner = gv.inter_edges[1], gv.inter_owner
        nb_of_w: dict[int, list[int]] = {}
        count_v = torch.bincount(local, minlength=n_i).double()
        count_vk: dict[tuple[int, int], int] = {}
        for v, w, k in zip(local.tolist(), remote.tolist(), owner.tolist(), strict=True):
            nb_of_w.setdefault(w, []).append(v)
            count_vk[(v, k)] = count_vk.get((v, k), 0) + 1
        own_of = dict(zip(remote.tolist(), owner.tolist(), strict=True))
        scores = []
        for w, x in items.t().tolist():
            best = 0.0
            for v in nb_of_w.get(w, []):
                k = own_of[w]
                if rows_by_owner:
                    val = float(rows_by_owner[k][v, x]) / count_vk[(v, k)] if k in rows_by_owner else 0.0
                elif residual is not None:
                    val = float(residual[v, x]) / float(count_v[v])
                else:
                    assert proximity is not None
                    val = float(proximity[v, x])
                best = max(best, val)
            scores.append(best)
        return torch.tensor(scores, dtype=torch.float64)

    def _individual(self, adv: AdversaryContext, pid: str, n_i: int, n: int,
                    rows: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The hop-2 messages received one by one (plaintext), as ``[n_i * n]`` vectors: a message
        in the boundary layout (``rows`` of ``n_i``) is put back in place, the other rows zero."""
        recs = [r for r in adv.view.records(self.params["tag"], received=True) if r.receiver == pid]
        if not recs:
            return {}
        first = min(r.round for r in recs)
        out = {}
        for r in recs:
            if r.round != first:
                continue
            t = adv.view.decode(r)
            if t is None or set(t) != {"x"}:
                return {}
            x = t["x"].double()
            if rows is not None and x.numel() == rows.numel() * n and rows.numel() != n_i:
                full = torch.zeros(n_i, n, dtype=torch.float64)
                full[rows] = x.view(-1, n)
                x = full.flatten()
            if x.numel() != n_i * n:
                return {}
            out[r.sender] = x
        return out

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> Any:
        out = super().evaluate(challenge, scores)
        return type(out)(out.value, out.chance, {**out.details, "source": getattr(self, "_source", "")}, out.roc)
