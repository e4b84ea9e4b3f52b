"""One experiment: data -> partition -> federation -> method -> ``result.json``.

This is what ``securefg run`` calls, and what examples and benchmarks script against.
The result contract (stable keys) is documented in the README: ``method, dataset, partition,
clients, protocol, seed, rounds, metrics, bytes_total, bytes_by_tag, wall_seconds``; ``stack``
says which content ran under that name (:mod:`securefg.protocol.stack_identity`) and
``failed_protections`` what the stack waived with ``unsafe`` (:mod:`securefg.protocol.guarantees`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from securefg.device import resolve_device, seed_everything
from securefg.errors import ConfigError
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import Method, MethodConfig, method_class
from securefg.methods.training import TrainConfig
from securefg.protocol.stack import ProtocolStack
from securefg.run_config import RunConfig, run_fingerprint

#: The run option (``--option patience=N``) that stops training after N rounds without a better
#: server-side validation score; each method has its own default (``Method.default_patience``).
PATIENCE = "patience"


def data_seed_of(cfg: RunConfig) -> int:
    """The seed of the data split and partition: ``data_seed``, else the run seed."""
    return cfg.seed if cfg.data_seed is None else cfg.data_seed


def resolve_stack(cfg: RunConfig) -> ProtocolStack:
    """The stack named by ``--protocol``, else the method's default (protected) stack; with
    ``--option robust=...`` its update aggregate made robust (:mod:`securefg.protocol.robust`)."""
    from securefg.protocol.robust.options import apply_robust_option

    mcls = method_class(cfg.method)
    name = cfg.protocol or mcls.default_stack_for(cfg)
    return apply_robust_option(ProtocolStack.load(name), mcls, cfg.options)


def build_method(cfg: RunConfig) -> tuple[RunConfig, Method, ProtocolStack, dict[str, Any]]:
    """The run's method on its task and its protocol stack, nothing run yet.

    Values left unset (``lr``, ``weight_decay``, ``local_epochs``, method options) come from the
    method's per-dataset preset (:func:`securefg.presets.apply_preset`) unless ``cfg.preset`` is
    off; explicit values always win. The data description carries the ``"preset"`` block.

    Returns:
        (the configuration as run (a one-shot method fixes its round count; preset values
        filled in), the method, the stack, the data description for result.json).
    """
    from securefg.experiment_data import build_task, default_train_config, split_options
    from securefg.presets import apply_preset

    cfg, preset_block = apply_preset(cfg)
    device = resolve_device(cfg.device)
    mcls = method_class(cfg.method)
    fixed = getattr(mcls, "fixed_rounds", None)  # one-shot methods (CeFGC) fix their round count
    if fixed is not None and cfg.rounds != fixed:
        from dataclasses import replace

        cfg = replace(cfg, rounds=int(fixed))
    stack = resolve_stack(cfg)
    stack.check_tags(mcls.TAGS)
    task, data_info = build_task(cfg)
    data_info["preset"] = preset_block
    # a method may carry its paper's step sizes (FedStruct: Table 4); --lr etc. still override
    base = mcls.train_defaults(task) if hasattr(mcls, "train_defaults") else default_train_config(cfg, task)
    train = TrainConfig(
        lr=cfg.lr if cfg.lr is not None else base.lr,
        weight_decay=cfg.weight_decay if cfg.weight_decay is not None else base.weight_decay,
        local_epochs=cfg.local_epochs if cfg.local_epochs is not None else base.local_epochs,
        batch_size=cfg.batch_size,
        prox_mu=cfg.prox_mu,
    )
    from securefg.protocol.robust.options import split_robust_options

    data_options, method_options = split_options(split_robust_options(cfg.options)[1])
    pooling = str(data_options.get("pooling", MethodConfig.graph_pooling))
    patience = method_options.pop(PATIENCE, mcls.default_patience)
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
        raise ConfigError(f"--option patience must be an integer >= 0 (0 = run every round), got {patience!r}")
    mconf = MethodConfig(rounds=cfg.rounds, train=train, device=device, seed=cfg.seed, hidden=cfg.hidden,
                         options=method_options, graph_pooling=pooling, patience=patience)
    method = mcls(task, mconf)
    helpers = tuple(p for p in stack.helper_parties() if p not in method.extra_parties)
    if helpers:  # e.g. ckks_robust's key holder: its own party (and process on Flower)
        method.extra_parties = (*method.extra_parties, *helpers)
    return cfg, method, stack, data_info


def run_experiment(cfg: RunConfig, *, on_round: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run one configuration end to end; write ``<out>/result.json`` when ``out`` is set.

    ``on_round(r, row)`` observes each round's history row (:class:`RoundRunner`).
    """
    t_start = time.perf_counter()
    seed_everything(cfg.seed)
    cfg, method, stack, data_info = build_method(cfg)
    device = method.config.device
    fed = Federation(method.num_clients, stack, seed=cfg.seed, extra_parties=getattr(method, "extra_parties", ()),
                     keep_payloads=cfg.keep_payloads)
    out_dir = Path(cfg.out) if cfg.out else None
    fingerprint = run_fingerprint(cfg)
    runner = RoundRunner(method, fed, rounds=cfg.rounds, out_dir=out_dir, checkpoint_every=cfg.checkpoint_every,
                         resume=cfg.resume, fingerprint=fingerprint, progress=cfg.progress,
                         patience=method.config.patience, on_round=on_round)
    outcome = runner.run()
    result = build_result(cfg, stack, fed, outcome.summary, outcome.history, data_info,
                          wall=time.perf_counter() - t_start + outcome.earlier_seconds,
                          train_seconds=outcome.train_seconds + outcome.earlier_seconds,
                          extra=getattr(method, "report", dict)())
    result["patience"] = method.config.patience
    result["rounds_run"] = len(outcome.history)
    if outcome.stopped_early is not None:
        result["stopped_early"] = outcome.stopped_early
    result["device"] = str(device)
    if outcome.resumed_from is not None:
        result["resumed_from_round"] = outcome.resumed_from
        result["earlier_seconds"] = outcome.earlier_seconds  # counted in wall_seconds and train_seconds
    if out_dir is not None:
        write_result(out_dir, result)
    result["_federation"] = fed  # for in-process callers (audits); not serialised
    return result


def build_result(
    cfg: RunConfig,
    stack: ProtocolStack,
    fed: Federation,
    summary: dict[str, Any],
    history: list[dict[str, Any]],
    data_info: dict[str, Any],
    *,
    wall: float,
    train_seconds: float,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``result.json`` object."""
    from securefg.metrics_doc import metrics_doc
    from securefg.protocol.stack_identity import identify
    from securefg.run_config import dataset_kind

    ts = fed.transcript.summary()
    privacy = _privacy(fed, stack)
    failed = [f.to_json() for f in stack.failed_protections]
    if privacy and any(f["protection"].startswith("dp_") for f in failed):
        waived = sorted({f["protection"] for f in failed if f["protection"].startswith("dp_")})
        note = f"the epsilon does NOT hold: the stack waives DP protection(s) {waived}; see failed_protections"
        privacy["notes"] = [note, *privacy.get("notes", [])]
    res: dict[str, Any] = {
        "method": cfg.method,
        "dataset": cfg.dataset,
        "partition": data_info.get("partition", cfg.partition),
        "clients": len(fed.client_ids),
        "protocol": stack.name,
        "protocol_source": stack.source,
        "stack": identify(stack).to_json(),
        "failed_protections": failed,
        "seed": cfg.seed,
        "data_seed": data_seed_of(cfg),
        "rounds": cfg.rounds,
        "metrics": summary,
        "metrics_doc": metrics_doc(cfg.method, dataset_kind(cfg.dataset), summary),
        "bytes_total": ts["bytes_total"],
        "wire_bytes_total": ts["wire_bytes_total"],
        "bytes_by_tag": ts["bytes_by_tag"],
        "bytes_by_party": ts["bytes_by_party"],
        "communication_rounds": ts["communication_rounds"],
        "envelopes": ts["envelopes"],
        "wall_seconds": wall,
        "train_seconds": train_seconds,
        "data": {k: v for k, v in data_info.items() if k != "preset"},
        "preset": data_info.get("preset"),
        "history": [{k: v for k, v in h.items() if k != "per_client"} for h in history],
        "config": {k: v for k, v in asdict(cfg).items() if k not in ("progress",)},
    }
    if privacy:
        res["privacy"] = privacy
    if extra:
        res.update(extra)
    return res


def _privacy(fed: Federation, stack: ProtocolStack) -> dict[str, Any]:
    from securefg.protocol.dp import privacy_report

    return dict(privacy_report(fed.parties, stack=stack) or {})


def write_result(out_dir: Path, result: dict[str, Any]) -> None:
    """Write ``result.json`` and ``curve.png`` (mean validation/test score per round)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    clean = {k: v for k, v in result.items() if not k.startswith("_")}
    (out_dir / "result.json").write_text(json.dumps(clean, indent=2, default=_json_default), encoding="utf-8")
    plot_history(clean.get("history", []), out_dir / "curve.png", title=f"{result['method']} on {result['dataset']} ({result['protocol']})")


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def plot_history(history: list[dict[str, Any]], path: Path, *, title: str) -> None:
    """Accuracy (or AUC) per round."""
    if not history:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = [h["round"] + 1 for h in history]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, label in (("mean_val", "mean client validation"), ("mean_test", "mean client test"),
                       ("mean_global_test", "global model as broadcast, mean client test"),
                       ("global_test_auc", "global test AUC"), ("global_val_auc", "global validation AUC")):
        ys = [h.get(key) for h in history]
        if any(isinstance(y, float) for y in ys):
            ax.plot(rounds, [y if isinstance(y, float) else float("nan") for y in ys], label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("score")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
