"""CeFGC, CeFGC*, CeFGC+ and CeFGC*+: federated graph classification in three rounds.

CeFGC (https://arxiv.org/abs/2601.15722; notes in ``shared/methods/cefgc.md``). Each client
trains graph diffusion models offline (phase 1); they cross the server once, sealed or
encrypted (R1 up, R2 down, each client receiving the *other* clients' models, shuffled, plus
the GNN initialisation W0); each client trains a GIN on its graphs and on graphs sampled from
the received models, and one secure FedAvg of the GIN weights (R3 up) gives the global model.

Variants: ``cefgc`` (one EDP-GNN per class held), ``cefgc_star`` (one label-conditioned model),
``cefgc_plus`` / ``cefgc_star_plus`` (the server first pairs every package with its most
cosine-similar peer and forwards pair averages, all under CKKS).

Who decrypts what (``protocols/cefgc_plus.toml``, semi-honest, no server-keyholder collusion):

* A ``keyholder`` party generates the CKKS key (N=8192, 128-bit). It seals the secret context
  to every client (they must decrypt the relayed models) and sends the server a public context
  with Galois keys (for encrypted inner products). The server never holds a secret key.
* R1: client ``i`` uploads ``Enc(theta_i)`` (its dense package) and ``Enc(c * theta_i /
  ||theta_i||)`` (for the similarity). The server computes every ``Enc(<u_i, u_j>)``, shuffles the
  pairs with a CSPRNG permutation and sends them to the keyholder, which decrypts the **permuted
  multiset of cosines** (it cannot tell which pair a value belongs to), floods them with noise
  and returns them. So the **server learns the cosine matrix** and the pairing (it must, to mix);
  the keyholder learns the unlabelled values; clients learn neither.
* R2: the server computes ``Enc((theta_i + theta_j*) / 2)`` (public coefficients), rerandomizes
  every copy, shuffles each bundle and forwards ``{mix_j : j != i}`` to client ``i``, who decrypts.
* Pairing granularity (cefgc.md §6.1 item 10 leaves it open): one partner per client *package*
  (CeFGC+: all its per-class models at once, compared on their concatenation; every class slot
  is then averaged presence-weighted, so a class only one of the pair holds passes unmixed).
  Cosines are rounded to 1e-3 before the argmax so CKKS/flooding noise cannot flip near-ties;
  all generators share one public init seed, so averaging two of them is meaningful.
* R3: GIN weights are summed under a *second* CKKS key (another parameter set, so a separate
  key the keyholder never shares): the server adds ciphertexts, the keyholder decrypts only the
  sum. A client colluding with the server therefore cannot read R3 uploads; it can read R1/R2
  ciphertexts (every client holds that key by design).

Node features of synthetic graphs (cefgc.md §6.1 item 2, decision (b) per degree): EDP-GNN
generates structure only, so next to every model the sender ships a table of its own
``P(degree, feature category | class)`` (:mod:`.node_features`); the receiver draws each
synthetic node's one-hot feature from ``P(category | degree, class)``. Graph tasks default to
the paper's features (TU node labels; one-hot degree for IMDB, where the table reproduces
degree features exactly). Measured, PROTEINS seed 0: one-hot degree features cap even a pooled
GIN at AUC 0.71, the original 3 node labels reach 0.81 (mean readout) / 0.83 (sum readout).

Leakage (measurable, see :mod:`.pairing`): under the paper's pairs (``mix_peers=1``) client
``i`` recovers its partner's package exactly as ``2 * mix - theta_i`` (HE changes nothing: the
leak is in the plaintext result); with 3 clients at least one pair is mutual, so this always
happens. By default (``mix_peers=2``) the server averages groups of >= 3 similar clients and
every member gets its group's mean, so a client learns only the sum of its group peers (with 3
clients: the mean of all three). Receivers of the non-mixing variants read every sender's
generators; ``dp_epsilon`` (:mod:`.dp_plan`) bounds what they reveal of any one training graph
(graph-level DP), the membership audit's unit. Receivers also learn each
sender's node-count distribution, per-class feature-by-degree frequencies and sampling settings, and under CeFGC (dense form) which
classes each sender holds. With ``cefgc.toml`` (sealed relay, no mixing) nobody but the final
recipients reads a model and the server learns nothing but sizes; R3 goes through SecAgg+.

Message inventory (tags) is below; ``TAGS`` maps each to its exchange.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch

from securefg.errors import ConfigError
from securefg.federation.codec import decode_tensors, encode_tensors
from securefg.federation.federation import Federation
from securefg.federation.party import Party
from securefg.federation.program.context import ClientAction, ClientContext, ServerContext
from securefg.methods.base import Method, MethodConfig, Task
from securefg.methods.cefgc import flights as flight_log
from securefg.methods.cefgc.generator_cache import GeneratorCache, cache_key
from securefg.methods.cefgc.generators import (
    DPSettings,
    fit_feature_tables,
    sampling_units,
    set_sampling,
    synthesize,
    train_generators,
    training_sets,
)
from securefg.methods.cefgc.package import (
    Architecture,
    Generator,
    canonical_order,
    dense_params,
    pack_dense,
    pack_exact,
    unpack_dense_generators,
    unpack_exact_generators,
)
from securefg.methods.cefgc.pairing import group_mix_plan, mix_plan, nearest_partners, similarity_groups
from securefg.methods.fedavg import combine_client_scores, server_model_material
from securefg.methods.head_owners import aggregate_owned, contribute_by_owner, owned_groups, require_sum
from securefg.methods.tasks import GraphTask
from securefg.methods.training import load_state, state_of, train_graphs_until_stall
from securefg.models.graph_score import DEFAULT_SIGMAS, EDPScoreConfig, GraphDiffusionModel, LangevinParams
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack

TAG_MODEL = "cefgc/model"
"""R1 + R2 (relay): a client's diffusion model package, forwarded to every other client."""
TAG_SIMILARITY = "cefgc/similarity"
"""R1, + variants only (similarity): the package weights, compared by cosine for the pairing."""
TAG_INIT = "cefgc/init"
"""R2 (broadcast): the GIN initialisation W0."""
TAG_WEIGHTS = "cefgc/weights"
"""R3 (aggregate): each client's change of the GIN weights from W0 (trained minus W0); the server
learns only their mean and adds W0 back. Uploading the change, not the weights (the same mean),
lets a norm rule see a boosted model: the weights' norm is dominated by the public W0."""
ACTION_PHASE1 = "cefgc/phase1"
"""Client action: phase 1 (train or load the generators, offline) and the R1 inputs (package, similarity vector)."""
ACTION_TRAIN = "cefgc/train"
"""Client action: R2 received (bundle and W0); sample synthetic graphs, train the GIN, contribute R3."""
#: Measurement keys (the experimenter's, never sent) carrying a party's report block as JSON.
MEASURE_CLIENT = "cefgc/client"
MEASURE_SERVER = "cefgc/server"
#: Offsets the sender's sampler-tuning draws from its training draws (same client seed).
TUNE_SEED_OFFSET = 500_009
#: What ``report()["timing"]`` sums over the parties.
TIMING_KEYS = ("diffusion_training", "sampler_tuning", "sampling", "protocol", "gnn_training")
#: Offsets the sender's DP feature-table noise from its other draws (same client seed).
TABLE_SEED_OFFSET = 700_001
#: Offsets the receiver's screening draws from its own generators (same client seed).
SCREEN_SEED_OFFSET = 900_007


def _option_number(o: Mapping[str, Any], name: str, kind: type[int | float]) -> float:
    """An option given as text (CLI, TOML) or number, as ``kind``; a typed error otherwise."""
    try:
        return kind(o[name])
    except (TypeError, ValueError):
        raise ConfigError(f"option {name} must be a{'n integer' if kind is int else ' number'}, got {o[name]!r}") from None


def check_options(o: Mapping[str, Any]) -> None:
    """Refuse option values that would train, sample or cache nothing useful, before phase 1 starts."""
    at_least = {"diffusion_epochs": 1, "diffusion_batch": 1, "diffusion_patience": 0, "max_nodes": 2,
                "tune_samples": 1, "gnn_epochs": 1, "gnn_patience": 0, "screen_samples": 0}  # patience 0: no early stop
    for name, low in at_least.items():
        if _option_number(o, name, int) < low:
            raise ConfigError(f"option {name} must be >= {low}, got {o[name]!r}")
    lr = _option_number(o, "diffusion_lr", float)
    if not (math.isfinite(lr) and lr > 0):
        raise ConfigError(f"option diffusion_lr must be finite and > 0, got {o['diffusion_lr']!r}")
    for name in ("dp_epsilon", "dp_max_grad_norm"):
        v = _option_number(o, name, float)
        if not (math.isfinite(v) and v >= 0):
            raise ConfigError(f"option {name} must be finite and >= 0, got {o[name]!r}")
    if _option_number(o, "dp_epsilon", float) > 0:
        if not 0 < _option_number(o, "dp_delta", float) < 1:
            raise ConfigError(f"option dp_delta must be in (0, 1), got {o['dp_delta']!r}")
        if _option_number(o, "dp_max_grad_norm", float) <= 0:
            raise ConfigError(f"option dp_max_grad_norm must be > 0, got {o['dp_max_grad_norm']!r}")
        if str(o["tune_sampling"]).lower() in ("true", "1", "yes"):
            raise ConfigError("tune_sampling reads the private training graphs outside the DP accounting; "
                              "turn it off with dp_epsilon > 0 (or set dp_epsilon=0)")
    if _option_number(o, "mix_peers", int) < 1:
        raise ConfigError(f"option mix_peers must be >= 1 (1 = the paper's pairs), got {o['mix_peers']!r}")
    from securefg.methods.cefgc.generator_screen import RULES

    if str(o["screen_rule"]) not in RULES:
        raise ConfigError(f"option screen_rule must be one of {', '.join(RULES)}, got {o['screen_rule']!r}")
    if str(o["screen_reference"]) not in ("generators", "graphs"):
        raise ConfigError(f"option screen_reference must be generators or graphs, got {o['screen_reference']!r}")
    for name in ("screen_margin", "screen_tolerance"):
        v = _option_number(o, name, float)
        if not (math.isfinite(v) and v >= 0):
            raise ConfigError(f"option {name} must be finite and >= 0, got {o[name]!r}")
    ratio = _option_number(o, "synthetic_ratio", float)
    if not (math.isfinite(ratio) and ratio >= 0):
        raise ConfigError(f"option synthetic_ratio must be finite and >= 0, got {o['synthetic_ratio']!r}")
    cache = str(o["generator_cache"])
    if cache and Path(cache).exists() and not Path(cache).is_dir():
        raise ConfigError(f"option generator_cache must name a folder, but {cache!r} is a file")


class CeFGC(Method):
    """CeFGC (basic): one diffusion model per class held; see the module docstring.

    Options:
        diffusion_epochs (int): Max epochs per generator. (default: ``150``)
        diffusion_patience (int): Early stop on the DSM loss, 0 = off. (default: ``0``)
        diffusion_lr (float): Adam step size of the score networks. (default: ``1e-3``)
        diffusion_batch (int): Graphs per score-matching batch. (default: ``32``)
        max_nodes (int): Largest graph a generator learns/draws (agreed). (default: ``40``)
        langevin_steps (int): Langevin steps per noise level. (default: ``30``)
        step_ratio, noise_factor (float): Sender's Langevin settings, shipped in the package
            (defaults: graph_score's MUTAG-tuned ``0.1`` and ``0.9``).
        tune_sampling (bool): Sender picks its step ratio (x0.5, x1, x2) by MMD against its
            own graphs, as EDP-GNN does; costs 3 extra samplings of ``tune_samples`` graphs
            per model. Off by default: on PROTEINS it changed the global AUC by
            -0.001, +0.006, +0.028, +0.007, -0.015 (seeds 0-4; mean +0.005), within noise, for
            about 35 s more per client. (default: ``False``)
        tune_samples (int): Graphs drawn per candidate step ratio by ``tune_sampling``. (default: ``16``)
        synthetic_ratio (float): Synthetic graphs per local training graph. (default: ``1.0``)
        common_neighbors (bool): Score networks also read two-hop counts, so a pair can tell it
            would close a triangle (graph_score's ``EDPScoreConfig.common_neighbors``; a
            departure from EDP-GNN, off to stay the paper's model). (default: ``False``)
        gnn_epochs (int): Max local GIN epochs (paper: 500). (default: ``500``)
        gnn_patience (int): Stop after this many epochs without loss decrease; 0 trains every
            epoch. (default: ``30``)
        weighting (str): FedAvg weights ``"uniform"`` (paper prose) or ``"size"``.
        generator_cache (str): Folder where each client keeps its phase-1 models (offline
            and reusable, as the paper says); empty = no cache. The key holds what training
            depends on, not the Langevin settings, so cached models serve any sampling and
            tuning choice. (default: ``""``)
        variant (str): ``"basic"`` or ``"star"`` (the CLI's ``--variant``). (default: class's)
        dp_epsilon (float): Graph-level DP of everything a package releases (score network by
            DP-SGD, size histogram and feature table with Gaussian noise; :mod:`.dp_plan`):
            the target epsilon per client, reported in ``result.json`` (``privacy``); 0 = off.
            (default: ``0.0``)
        dp_delta (float): The delta of ``dp_epsilon``. (default: ``1e-5``)
        dp_max_grad_norm (float): DP-SGD per-graph clip. (default: ``1.0``)
        mix_peers (int): + variants: each package is averaged with at least this many similar
            peers; 1 is the paper's pair average, which lets a client recover its partner as
            ``2 * avg - own`` (:mod:`.pairing`). (default: ``2``)
        screen_generators (bool): Receivers screen received units against their own graphs' class
            statistics and drop those that do not fit their declared class (:mod:`.generator_screen`;
            the defence against spoofed generators; on by default since it dropped no honest unit
            on MUTAG seeds 0-2, docs/robust.md). (default: ``True``)
        screen_rule (str): ``"alignment"``: drop the units of a sender whose labels a relabelling
            among its own classes fits better; ``"nearest"``: drop a unit nearer another own class
            than its declared one. (default: ``"alignment"``)
        screen_reference (str): What the screen compares received units with: ``"generators"``,
            graphs from the receiver's own generators (like for like: synthetic graphs share an
            offset from real ones); ``"graphs"``, its own training graphs. (default: ``"generators"``)
        screen_samples (int): Graphs the screen draws per received unit (and per own class) to
            judge it, apart from the training draws; 0 judges the training draws. (default: ``0``)
        screen_margin (float): ``"nearest"``'s distance ratio. (default: ``1.0``)
        screen_tolerance (float): ``"alignment"`` drops when the best relabelling gains more than
            this share of what a clean relabelling would (0.5: the midpoint). (default: ``0.5``)
        feature_model (str): How receivers give synthetic nodes their categories (§6.1 item 2):
            ``"degree"`` draws each node from the sender's ``P(f | degree, class)``;
            ``"pairwise"`` also ships the category pairs at edge ends and refines the draw by
            Gibbs sweeps (:mod:`.node_features`); on one-hot degree features (IMDB) it changes
            nothing and only adds a ``features x features`` table per model. (default: ``"degree"``)
    """

    name = "cefgc"
    tasks = frozenset({"graph"})
    TAGS: ClassVar[dict[str, ExchangeKind]] = {
        TAG_MODEL: ExchangeKind.RELAY, TAG_INIT: ExchangeKind.BROADCAST, TAG_WEIGHTS: ExchangeKind.AGGREGATE,
    }
    default_stack = "cefgc_robust"  # cefgc.toml + the norm filter on R3 (issue 43: 0.00 points on MUTAG seeds 0-2)
    fixed_rounds = 1
    conditional: bool = False
    mixing: ClassVar[bool] = False
    extra_parties: tuple[str, ...] = ()
    option_defaults: ClassVar[Mapping[str, Any]] = {
        "diffusion_epochs": 150, "diffusion_patience": 0, "diffusion_lr": 1e-3, "diffusion_batch": 32,
        "max_nodes": 40, "langevin_steps": 30, "noise_factor": 0.9, "step_ratio": 0.1,
        "tune_sampling": False, "tune_samples": 16, "synthetic_ratio": 1.0, "common_neighbors": False,
        "gnn_epochs": 500, "gnn_patience": 30, "weighting": "uniform", "generator_cache": "", "variant": "",
        "dp_epsilon": 0.0, "dp_delta": 1e-5, "dp_max_grad_norm": 1.0, "mix_peers": 2,
        "screen_generators": True, "screen_rule": "alignment", "screen_reference": "generators", "screen_samples": 0,
        "screen_margin": 1.0, "screen_tolerance": 0.5, "feature_model": "degree",
    }
    ROBUST_TAGS = (TAG_WEIGHTS,)
    #: The default for runs whose heads are averaged over their owners only (several datasets,
    #: ``heads=dataset``, ``head_average=owners``): that average divides a sum by per-head owner
    #: weights, and ``masked_robust`` returns a judged mean, not a sum, so R3 stays SecAgg+ alone.
    OWNER_HEADS_STACK: ClassVar[str] = "cefgc"

    @classmethod
    def default_stack_for(cls, cfg: Any) -> str:
        from securefg.experiment_data import owner_heads

        return cls.OWNER_HEADS_STACK if cls.default_stack == "cefgc_robust" and owner_heads(cfg) else cls.default_stack

    def __init__(self, task: Task, config: MethodConfig) -> None:
        super().__init__(task, config)
        variant = str(self.options["variant"]).lower()
        if variant not in ("", "basic", "star", "advanced"):
            raise ConfigError(f"CeFGC variant must be 'basic' or 'star', got {variant!r}")
        if variant:
            self.conditional = variant in ("star", "advanced")
        if self.options["weighting"] not in ("uniform", "size"):
            raise ConfigError(f"weighting must be 'uniform' or 'size', got {self.options['weighting']!r}")
        if self.options["feature_model"] not in ("degree", "pairwise"):
            raise ConfigError(f"feature_model must be 'degree' or 'pairwise', got {self.options['feature_model']!r}")
        if self.num_clients < 2:
            raise ConfigError("CeFGC needs at least 2 clients: each receives the *other* clients' models")
        check_options(self.options)
        o = self.options  # the sender's Langevin settings, checked here rather than after phase 1's training
        self.sampling = LangevinParams(int(o["langevin_steps"]), float(o["step_ratio"]), float(o["noise_factor"]))
        self.arch = Architecture(
            config=EDPScoreConfig(common_neighbors=bool(self.options["common_neighbors"])),
            sigmas=DEFAULT_SIGMAS, max_node_num=int(self.options["max_nodes"]), num_classes=task.num_classes,
            conditional=self.conditional, feature_width=task.num_features,
            feature_edges=self.options["feature_model"] == "pairwise" and task.num_features > 0,
        )
        self.timing: dict[str, float] = dict.fromkeys(TIMING_KEYS, 0.0)
        """Summed over the parties' own timings (:meth:`combine_measures`)."""
        self.info: dict[str, Any] = {"clients": {}}
        """The clients' report blocks, as they measured them (:meth:`combine_measures`)."""
        self.dense = self.mixing
        self._fed: Federation | None = None
        self._server_report: dict[str, Any] = {}
        self.init_seed = 1_000_003 * (config.seed + 1)  # public, agreed before round 1 (row 0b)
        eps = float(o["dp_epsilon"])
        self.dp = DPSettings(eps, float(o["dp_delta"]), float(o["dp_max_grad_norm"])) if eps > 0 else None

    # ------------------------------------------------------------------ setup
    def check_stack(self, stack: ProtocolStack) -> None:
        from securefg.federation.program.relay import check_relay

        mech = stack.resolve(TAG_MODEL, ExchangeKind.RELAY).mechanism
        if self.mixing and not hasattr(mech, "plan_mix"):
            raise ConfigError(
                f"{self.name} pair-averages models on the server, but stack {stack.name!r} carries "
                f"{TAG_MODEL!r} with {mech.name!r}, which cannot combine items; use protocols/cefgc_plus.toml "
                "(ckks_relay) or protocols/plaintext.toml"
            )
        check_relay(stack, TAG_MODEL)
        if self.owner_groups is not None:
            require_sum(stack, TAG_WEIGHTS)
        self.dense = self.dense_for(stack)

    def dense_for(self, stack: ProtocolStack) -> bool:
        """Dense (float, fixed layout) packages when the server combines them or CKKS carries them."""
        return self.mixing or stack.resolve(TAG_MODEL, ExchangeKind.RELAY).mechanism.name == "ckks_relay"

    def setup_server(self, party: Party) -> None:
        party.state["model"] = self.make_model()  # W0, server-made

    def setup_client(self, party: Party, index: int) -> None:
        task = self.task
        assert isinstance(task, GraphTask)  # guaranteed by ``tasks``
        party.state["data"] = {"train": task.train[index], "val": task.val[index], "test": task.test[index]}
        party.state["index"] = index
        party.state["timing"] = dict.fromkeys(TIMING_KEYS, 0.0)
        if not any(training_sets(task.train[index], self.arch).values()):
            raise ConfigError(f"client {index} has no training graph of at most max_nodes={self.arch.max_node_num} "
                              "nodes, so it would train no generator; raise --option max_nodes")

    # ------------------------------------------------------------ server half
    def configure_init(self, server: Party) -> dict[str, torch.Tensor]:
        """W0, broadcast in R2."""
        return state_of(server.state["model"])

    def configure_mix(self, server: Party, order: list[str], similarity: torch.Tensor) -> dict[str, dict[str, float]]:
        """CeFGC+: average every package with its most similar peer(s); keep what was learned.

        ``mix_peers = 1``: the paper's pairs (Eq. 11-12). Otherwise groups of at least
        ``mix_peers + 1`` similar clients, every member getting the group mean (:mod:`.pairing`).
        ``server.state["partners"]`` maps each client to the peers its package was mixed with.
        """
        server.state["similarity"] = {"order": order, "matrix": similarity.tolist()}
        peers = int(self.options["mix_peers"])
        if peers == 1:
            pairs = nearest_partners(order, similarity)
            server.state["partners"] = {i: [j] for i, j in pairs.items()}
            return mix_plan(pairs)
        groups = similarity_groups(order, similarity, size=min(peers + 1, len(order)))
        server.state["partners"] = {i: [j for j in g if j != i] for g in groups for i in g}
        return group_mix_plan(groups)

    @staticmethod
    def learned_from_mix(partners: Mapping[str, list[str]]) -> dict[str, float]:
        """Per-round figures of the mixing: mutual pairs (paper pairs) or the smallest group's peers."""
        if all(len(p) == 1 for p in partners.values()):
            return {"mutual_pairs": float(sum(partners[p[0]] == [i] for i, p in partners.items()) / 2)}
        return {"min_mix_peers": float(min(len(p) for p in partners.values()))}

    def aggregate_train(self, server: Party, mean: dict[str, torch.Tensor]) -> None:
        """The one FedAvg: the global GIN is the (secure) mean of the clients' weights."""
        load_state(server.state["model"], mean)

    # ------------------------------------------------------------ client half
    def handle_phase1(self, client: Party) -> None:
        """Offline: train this client's generator(s) (or load them from its own cache)."""
        o, k = self.options, client.state["index"]
        graphs = client.state["data"]["train"]
        cache, key = self._cache(), self._cache_key(k, graphs)
        entry = cache.load(k, key) if cache is not None else None
        if entry is not None:
            loaded, report = entry
            models: dict[int, GraphDiffusionModel] = {
                0 if self.conditional or m.class_label is None else m.class_label: m for m in loaded}
            report.pop("sha256", None)
            report["cached"] = True
        else:
            gen = torch.Generator().manual_seed(self.config.seed * 7919 + k)
            models, rep = train_generators(
                graphs, self.arch, init_seed=self.init_seed, epochs=int(o["diffusion_epochs"]),
                batch_size=int(o["diffusion_batch"]), lr=float(o["diffusion_lr"]),
                patience=int(o["diffusion_patience"]) or None, generator=gen, device=self.config.device, dp=self.dp,
            )
            report = {"models": {str(s): v for s, v in rep.models.items()}, "train_seconds": rep.train_seconds, "cached": False}
            if cache is not None:
                cache.store(k, key, models, report)
            _tick(client, "diffusion_training", rep.train_seconds)
        # the sender's Langevin settings: not part of the cache, so cached models serve any of them
        chosen, tune_seconds = set_sampling(
            models, graphs, self.arch, sampling=self.sampling, tune=bool(o["tune_sampling"]), tune_samples=int(o["tune_samples"]),
            generator=torch.Generator().manual_seed(self.config.seed * 7919 + k + TUNE_SEED_OFFSET), device=self.config.device)
        for slot, info in chosen.items():
            report["models"].setdefault(str(slot), {}).update(info)
        report["tune_seconds"] = tune_seconds
        _tick(client, "sampler_tuning", tune_seconds)
        client.state["generators"] = models
        table_noise = {int(s): float(v["dp"]["table_sigma"]) for s, v in report["models"].items() if "dp" in v}
        if self.dp is not None and not table_noise:
            raise AssertionError("DP is on but phase 1 planned no noise")
        client.state["feature_tables"] = fit_feature_tables(
            graphs, self.arch, noise_std=table_noise or None,
            generator=torch.Generator().manual_seed(self.config.seed * 7919 + k + TABLE_SEED_OFFSET) if table_noise else None)
        client.state["report"] = {"phase1": report}

    def handle_package(self, client: Party) -> bytes:
        """R1: this client's models as one relay item (dense for CKKS/mixing, else exact)."""
        models: dict[int, GraphDiffusionModel] = client.state["generators"]
        tables = client.state["feature_tables"]
        if self.dense:
            pkg = pack_dense(models, self.arch, tables)
            client.state["own_package"] = pkg
            return encode_tensors(pkg)
        return encode_tensors(pack_exact(models, tables))

    def handle_similarity_input(self, client: Party) -> torch.Tensor:
        """R1 (+): the vector this client's package is compared by."""
        return dense_params(client.state["own_package"], self.arch)

    def handle_bundle(self, client: Party, blobs: list[bytes], w0: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """R2 received: sample synthetic graphs, train the GIN from W0; return weights for R3."""
        k = client.state["index"]
        received = [decode_tensors(b) for b in blobs]
        if self.dense:
            client.state["received_packages"] = received
            usable = self._peers_mean(client, received) if self.mixing else None
            packages = [unpack_dense_generators(pkg, self.arch) for pkg in (usable or received)]
        else:
            packages = [unpack_exact_generators(pkg) for pkg in received]
        package_of = {id(g): p for p, gens in enumerate(packages) for g in gens}  # the screen judges per sender
        gens = canonical_order([g for gens in packages for g in gens])
        models = [g.model for g in gens]
        client.state["received_models"] = models
        local = client.state["data"]["train"]
        total = round(float(self.options["synthetic_ratio"]) * len(local))
        t0 = time.perf_counter()
        synthetic, records = synthesize(gens, total=total, seed=self.config.seed * 7919 + k, device=self.config.device)
        if self.options["screen_generators"]:
            synthetic, verdicts = self._screen(client, gens, package_of, synthetic, records)
            client.state["screen"] = verdicts  # the receiver's own record of what it dropped
            client.state["report"]["screen"] = [v.to_dict() for v in verdicts]
        _tick(client, "sampling", time.perf_counter() - t0)
        client.state["synthetic"] = synthetic  # the client's own training data from here on
        if self.owner_groups is not None:  # the heads this client trains: its own and its synthetic graphs'
            owned = owned_groups(self.owner_groups, list(local) + synthetic)
            client.state["owned_heads"] = owned
            client.state["report"]["heads_trained"] = [n for n, o in zip(self.owner_groups.names, owned.tolist()) if o]
        client.state["report"].update(
            received_models=len(models), synthetic=len(synthetic), local=len(local), units=records)
        t0 = time.perf_counter()
        model = self.make_model()
        load_state(model, w0)
        torch.manual_seed(self.config.seed * 7919 + k)  # dropout draws: same in HE and plaintext runs
        epochs = self._train_gnn(model, list(local) + synthetic, seed=self.config.seed * 7919 + k)
        data = client.state["data"]
        val, test = self.score_graphs(model, data["val"]), self.score_graphs(model, data["test"])
        client.state["scores"] = {"val_acc": val["acc"], "val_auc": val["auc"], "test_acc": test["acc"], "test_auc": test["auc"]}
        client.state["model"] = model
        _tick(client, "gnn_training", time.perf_counter() - t0)
        client.state["report"]["gnn_epochs"] = epochs
        return state_of(model)

    def _screen(self, client: Party, gens: list[Generator], package_of: Mapping[int, int], synthetic: list[Any],
                records: list[dict[str, int]]) -> tuple[list[Any], list[Any]]:
        """The receiver's screen of the received units (:mod:`.generator_screen`): the kept
        training graphs and one verdict per judged unit.

        ``screen_samples`` > 0 judges every unit on that many graphs of its own, drawn apart from
        the training draws (a few graphs per unit make a noisy mean); the reference is
        ``screen_reference``'s, at the same count per class."""
        from securefg.methods.cefgc.generator_screen import keep_units, screen_units

        o, seed = self.options, self.config.seed * 7919 + client.state["index"] + SCREEN_SEED_OFFSET
        per_unit = int(o["screen_samples"])
        if per_unit > 0:
            judged, judged_records = synthesize(gens, total=per_unit * len(sampling_units(gens)), seed=seed, device=self.config.device)
        else:
            judged, judged_records = synthetic, records
            per_unit = max((int(r["graphs"]) for r in records), default=0)
        if o["screen_reference"] == "graphs":
            reference = list(client.state["data"]["train"])
        else:  # like for like: received graphs share the diffusion models' offset from real ones, and so do the
            # receiver's own generators, whose labels are true
            tables = client.state["feature_tables"]
            own = [Generator(m, tables.get(slot)) for slot, m in sorted(client.state["generators"].items())]
            reference, _ = synthesize(own, total=per_unit * len(sampling_units(own)), seed=seed + 1, device=self.config.device)
        senders = [package_of[id(gens[rec["model"]])] for rec in judged_records]
        _, verdicts = screen_units(reference, judged, judged_records, rule=str(o["screen_rule"]), margin=float(o["screen_margin"]),
                                   tolerance=float(o["screen_tolerance"]), senders=senders)
        return keep_units(synthetic, records, verdicts), verdicts

    def _peers_mean(self, client: Party, received: list[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]] | None:
        """One group of every client (all mixes equal): the peers' mean ``(K * mix - own) / (K - 1)``.

        The client learns nothing new (it can compute this anyway, :mod:`.pairing`), but its
        synthetic graphs then come from its peers' models, not from a third of its own again.
        ``None`` when the mixes differ (several groups, or the paper's pairs): they are used as received.
        """
        if int(self.options["mix_peers"]) < 2 or len(received) != self.num_clients - 1:
            return None
        first = received[0]
        scale = max(float(v.double().abs().max()) for v in first.values()) + 1.0
        if any(float((pkg[k].double() - first[k].double()).abs().max()) > 1e-4 * scale for pkg in received[1:] for k in first):
            return None
        own, g = client.state["own_package"], self.num_clients
        out = {}
        for k, v in first.items():
            mean = (g * sum(p[k].double() for p in received) / len(received) - own[k].double()) / (g - 1)
            # presence, size pmf, sampling and feature tables are non-negative: cut CKKS noise below 0
            out[k] = (mean if k.endswith("/params") else mean.clamp(min=0)).to(v.dtype)
        return [out]

    def _train_gnn(self, model: torch.nn.Module, graphs: list[Any], *, seed: int) -> int:
        """Up to ``gnn_epochs`` epochs; stop after ``gnn_patience`` without a loss decrease (paper)."""
        assert isinstance(self.task, GraphTask)
        return train_graphs_until_stall(
            model, self.optimizer_for(model), graphs, max_epochs=int(self.options["gnn_epochs"]),
            patience=int(self.options["gnn_patience"]), batch_size=self.config.train.batch_size,
            device=self.config.device, generator=torch.Generator().manual_seed(seed), groups=self.task.label_groups)

    # ------------------------------------------------------------- the protocol
    def server_round(self, srv: ServerContext, r: int) -> dict[str, float]:
        """Phase 1 at the clients, R1 + R2 (similarity and pairing for the + variants, the relay,
        W0 with the training action) and R3, the one aggregate of the GIN weights."""
        server = srv.party
        ready = sorted(srv.ask(ACTION_PHASE1))  # phase 1, offline at each client; R1 inputs prepared
        t0 = time.perf_counter()
        learned: dict[str, float] = {}
        if self.mixing:  # R1 (similarity upload) -> keyholder decrypts the permuted cosines
            order, sim = srv.similarity(TAG_SIMILARITY, clients=ready, metric="cosine")
            plan = self.configure_mix(server, order, sim)
            srv.exchange.stack.resolve(TAG_MODEL, ExchangeKind.RELAY).mechanism.plan_mix(server, TAG_MODEL, plan)  # type: ignore[attr-defined]
            learned.update(self.learned_from_mix(server.state["partners"]))
            ready = list(order)
        forwarded = srv.relay(TAG_MODEL, clients=ready, exclude_self=True, shuffle=True)  # R1 up + R2 down
        receivers = srv.broadcast(TAG_INIT, self.configure_init(server), to=forwarded)  # R2 down
        protocol = time.perf_counter() - t0
        trained = sorted(srv.ask(ACTION_TRAIN, to=receivers))  # sample, train the GIN, contribute R3
        t0 = time.perf_counter()
        w0 = state_of(server.state["model"])
        if self.owner_groups is None:
            change = srv.aggregate(TAG_WEIGHTS, clients=trained)  # R3
        else:  # R3, each head over the clients that trained it; a head nobody trained keeps W0
            change = aggregate_owned(srv, TAG_WEIGHTS, self.owner_groups, clients=trained)  # no owner: zero change
        protocol += time.perf_counter() - t0
        _tick(server, "protocol", protocol)
        self.aggregate_train(server, {k: w0[k] + change[k].to(w0[k].dtype) for k in w0})
        return learned

    def client_actions(self) -> Mapping[str, ClientAction]:
        return {ACTION_PHASE1: self.on_phase1, ACTION_TRAIN: self.on_train}

    def on_phase1(self, cli: ClientContext) -> None:
        """Phase 1 (offline), then this client's R1 inputs: its package (and, + variants, its similarity vector)."""
        party = cli.party
        self.dense = self.dense_for(cli.exchange.stack)
        self.handle_phase1(party)
        cli.offer_relay(TAG_MODEL, self.handle_package(party))
        if self.mixing:
            cli.offer_similarity(TAG_SIMILARITY, self.handle_similarity_input(party))

    def on_train(self, cli: ClientContext) -> None:
        """R2 received: the other clients' models and W0; train the GIN and contribute it to R3."""
        party = cli.party
        w0 = cli.received(TAG_INIT, like=state_of(self.make_model()))
        weights = self.handle_bundle(party, cli.relayed(TAG_MODEL), w0)
        change = {k: v - w0[k].to(v.dtype) for k, v in weights.items()}  # R3 carries the change from W0
        party.state["report"]["upload_norm"] = float(torch.sqrt(sum((v.double() ** 2).sum() for v in change.values())))
        weight = None if self.options["weighting"] == "uniform" else float(len(party.state["data"]["train"]))
        if self.owner_groups is None:
            cli.contribute(TAG_WEIGHTS, change, weight=weight)
        else:
            contribute_by_owner(cli, TAG_WEIGHTS, change, self.owner_groups, party.state["owned_heads"], weight=weight)

    # ------------------------------------------------------------- measuring
    def measure_client(self, party: Party) -> dict[str, Any]:
        """The client's own scores, plus its report block (phase 1, what it received and
        synthesized, its timings) for ``report()``."""
        block = {"report": party.state.get("report", {}), "timing": party.state.get("timing", {})}
        return {**party.state.get("scores", {}), MEASURE_CLIENT: json.dumps(block, default=float)}

    def measure_server(self, party: Party) -> dict[str, Any]:
        """The global model, plus what the server learned (the pairing) and its protocol time."""
        block = {"partners": party.state.get("partners"), "similarity": party.state.get("similarity"),
                 "protocol_seconds": party.state.get("timing", {}).get("protocol", 0.0)}
        return {**server_model_material(self, party), MEASURE_SERVER: json.dumps(block, default=float)}

    def combine_measures(self, server: Mapping[str, Any], per_client: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """``combine_client_scores`` of the clients' scores; the report blocks go to ``report()``."""
        scores: dict[str, dict[str, Any]] = {}
        timing = dict.fromkeys(TIMING_KEYS, 0.0)
        for cid, values in per_client.items():
            scores[cid] = {k: v for k, v in values.items() if k != MEASURE_CLIENT}
            if MEASURE_CLIENT in values:
                block = json.loads(values[MEASURE_CLIENT])
                self.info["clients"][cid] = block["report"]
                for k, v in block["timing"].items():
                    timing[k] = timing.get(k, 0.0) + float(v)
        if MEASURE_SERVER in server:
            self._server_report = json.loads(server[MEASURE_SERVER])
            timing["protocol"] = float(self._server_report["protocol_seconds"])
        self.timing = timing
        return combine_client_scores(self, {k: v for k, v in server.items() if k != MEASURE_SERVER}, scores)

    def observe_run(self, fed: Federation) -> None:
        """The experimenter's finished run: ``report()`` reads its transcript and stack."""
        self._fed = fed
        self.dense = self.dense_for(fed.stack)

    def summarize(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        last = history[-1]
        return {
            "test_auc": last.get("global_test_auc"), "test_acc": last.get("global_test_acc"),
            **({"global_val_auc": last["global_val_auc"]} if "global_val_auc" in last else {}),
            **({"test_auc_by_dataset": last["global_test_auc_by_dataset"]} if "global_test_auc_by_dataset" in last else {}),
            "mean_client_val_auc": last.get("mean_val"), "mean_client_test_auc": last.get("mean_test"),
            "per_client": last.get("per_client", {}),
        }

    def report(self) -> dict[str, Any]:
        """Extra result.json keys: paper rounds vs actual flights, bytes per phase, timing."""
        if self._fed is None:
            raise RuntimeError("CeFGC.report() needs the finished run (observe_run)")
        tr = self._fed.transcript
        fl = flight_log.flights(tr)
        up = {TAG_MODEL, TAG_SIMILARITY}
        rounds = flight_log.paper_rounds(fl, upload_tags=up, download_tags={TAG_MODEL, TAG_INIT}, weights_tag=TAG_WEIGHTS)
        out: dict[str, Any] = {
            "cefgc": {"variant": self.name if not self.options["variant"] else f"{self.name}/{self.options['variant']}",
                      "conditional": self.conditional, "mixing": self.mixing, "dense_packages": self.dense,
                      "diffusion_params": self.arch.new_model(class_label=0, init_seed=0).num_parameters, **self.info},
            "paper_rounds": rounds,
            "flights": fl,
            "helper_traffic": flight_log.helper_traffic(tr),
            "timing": {f"{k}_seconds": v for k, v in self.timing.items()},
        }
        if self.dp is not None:
            out["privacy"] = self.privacy_report()
        if self.mixing:
            out["cefgc"]["server_learned"] = {"partners": self._server_report.get("partners"),
                                              "similarity": self._server_report.get("similarity")}
        return out

    def privacy_report(self) -> dict[str, Any]:
        """``result.json``'s ``privacy``: the graph-level epsilon each client's package spends."""
        assert self.dp is not None
        clients: dict[str, Any] = {}
        for pid, info in self.info["clients"].items():
            slots = {s: m["dp"] for s, m in info["phase1"]["models"].items() if "dp" in m}
            clients[pid] = {"epsilon": max(v["epsilon"] for v in slots.values()), "slots": slots}
        return {
            "epsilon": max((c["epsilon"] for c in clients.values()), default=None), "delta": self.dp.delta,
            "target_epsilon": self.dp.epsilon, "accountant": "rdp", "unit": "graph", "mechanism": "cefgc dp_epsilon",
            "max_grad_norm": self.dp.max_grad_norm, "clients": clients,
            "notes": [
                ("unit 'graph': neighbouring runs differ in one training graph of one client; it covers every "
                 "release computed from the graphs (score network by DP-SGD, node-count histogram, feature table)."),
                ("slots (one model per class for CeFGC) train on disjoint graphs: a client's epsilon is the "
                 "largest over its slots (parallel composition)."),
                "not covered: which classes a client holds (CeFGC ships one model per class present).",
            ],
        }

    def _cache(self) -> GeneratorCache | None:
        root = str(self.options["generator_cache"])
        return GeneratorCache(root) if root else None

    def _cache_key(self, k: int, graphs: list[Any]) -> str:
        """What client ``k``'s phase-1 training depends on (:func:`.generator_cache.cache_key`)."""
        return cache_key(graphs, self.arch, client=k, seed=self.config.seed, init_seed=self.init_seed,
                         options=self.options, device_type=torch.device(self.config.device).type)

    def _cache_path(self, k: int, graphs: list[Any]) -> Path | None:
        cache = self._cache()
        return cache.path(k, self._cache_key(k, graphs)) if cache is not None else None


def _tick(party: Party, key: str, seconds: float) -> None:
    """Add ``seconds`` to this party's own timing of ``key``."""
    timing = party.state.setdefault("timing", dict.fromkeys(TIMING_KEYS, 0.0))
    timing[key] = timing.get(key, 0.0) + seconds


class CeFGCStar(CeFGC):
    """CeFGC* (advanced): one label-conditioned diffusion model per client."""

    name = "cefgc_star"
    conditional = True


class CeFGCPlus(CeFGC):
    """CeFGC+: CeFGC with server-side pair averaging under CKKS (``protocols/cefgc_plus.toml``)."""

    name = "cefgc_plus"
    default_stack = "cefgc_plus"
    mixing = True
    extra_parties = ("keyholder",)
    TAGS: ClassVar[dict[str, ExchangeKind]] = {**CeFGC.TAGS, TAG_SIMILARITY: ExchangeKind.SIMILARITY}


class CeFGCStarPlus(CeFGCPlus):
    """CeFGC*+: CeFGC* with server-side pair averaging under CKKS."""

    name = "cefgc_star_plus"
    conditional = True
