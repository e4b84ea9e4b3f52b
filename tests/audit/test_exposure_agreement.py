"""The exposure ledger, each shipped stack's description and a real transcript agree (issue 38, class 5).

For every shipped stack (``protocols/*.toml``) and every registered method it can carry, one
round runs in process on a tiny generated graph. Three accounts of who reads each tag must
then match, party by party:

1. **The transcript** (read here, independently of any declaration): a party reads a tag if
   it received it in ``plaintext`` or ``aggregate`` form, or if it received protected bytes of
   it (``sealed``, ``ciphertext``, ``masked``) and is where they end: within one exchange call,
   its last protected envelope of the tag (``keys`` included) is one it *received*, not one it
   passed on. A relay (the server under ``sealed_relay``, the shuffler under ``mailbox``)
   forwards what it gets; the final recipient opens it (the server opening the shuffler's
   batch, a client its box, the key holder a ciphertext, the aggregator a masked sum after the
   unmasking shares). A party that receives ciphertexts of a call and passes none on decrypts
   them (a key holder that seals what it decrypted). Exchange calls are told apart by wrapping
   the server's exchange methods.
2. **The ledger** (:func:`securefg.audit.ledger.exposure_ledger`), derived from the mechanisms'
   exposure declarations (:mod:`securefg.protocol.exposure`).
3. **The stack's description**, through the quotations pinned in :mod:`.stack_descriptions`.

Before the fix the ledger guessed readers from wire forms: FedSheafHN's shuffler "opened" the
embeddings and feedback and the server read nothing, and no secure-sum aggregator read its sum.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
import torch

import securefg.methods.catalog  # noqa: F401  (registers every method)
from securefg.audit.ledger import LedgerRow, exposure_ledger, tag_exposure
from securefg.data.synthetic import make_csbm, make_graph_classification
from securefg.errors import ConfigError
from securefg.experiment_data import degree_features, max_degree
from securefg.federation.envelope import Form
from securefg.federation.federation import Federation
from securefg.federation.party import is_client
from securefg.federation.program.context import ServerContext
from securefg.federation.runner import RoundRunner
from securefg.federation.transcript import Record
from securefg.methods.base import MethodConfig, available_methods, method_class
from securefg.methods.tasks import GraphTask, NodeTask
from securefg.methods.training import TrainConfig
from securefg.protocol.exposure import READS, declared_mechanisms, exposure_of, reading_roles, roles_of
from securefg.protocol.mechanism import ExchangeKind, mechanism_class, mechanisms_for
from securefg.protocol.stack import ProtocolStack, protocols_dir
from tests.audit.stack_descriptions import DESCRIBED, described, normalized

READABLE = frozenset({Form.PLAINTEXT, Form.AGGREGATE})
CALLS = ("broadcast", "send", "aggregate", "similarity", "personalized_aggregate", "relay", "collect", "reply",
         "peer_sum", "shared_sum")
"""ServerContext methods that each start one exchange call of a tag."""

#: Options that keep one round tiny, by method-name prefix.
FAST: dict[str, dict[str, Any]] = {
    "cefgc": {"diffusion_epochs": 1, "langevin_steps": 1, "tune_samples": 2, "gnn_epochs": 1, "max_nodes": 8,
              "synthetic_ratio": 0.5},
    "fedsheafhn": {"warmup_epochs": 1, "refresh_every": 2, "knn": 2, "hn_hidden": 4},
    "fedsage_plus": {"gen_local_steps": 2, "gen_fed_steps": 1, "gen_batch": 4, "gen_hidden": 8},
    "fedstruct": {"structure_hops": 2, "structure_dim": 4},
}
#: Option sets that bring out tags the defaults never send (each run besides the default one).
VARIANTS: dict[str, tuple[dict[str, Any], ...]] = {
    "fedsheafhn": ({"warm_start": "secure_mean"},),
    "fedstruct": ({"variant": "A", "nsf": "degree"}, {"hardened": True}, {"edge_dp_epsilon": 4.0}),
}


@dataclass(frozen=True)
class Case:
    """One run: a shipped stack file, a method it can carry and the method's options."""

    stack: str
    method: str
    options: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.options)
        return f"{self.stack}-{self.method}" + (f"[{extra}]" if extra else "")


def cases() -> list[Case]:
    """Every (shipped stack, method) pair the stack binds every tag of, plus the option variants."""
    out = []
    for path in sorted(protocols_dir().glob("*.toml")):
        stack = ProtocolStack.load(path)
        for name in available_methods():
            mcls = method_class(name)
            if not mcls.TAGS:
                continue  # one-owner baselines send nothing
            try:
                stack.check_tags(mcls.TAGS)
            except ConfigError:
                continue
            out.append(Case(path.stem, name))
            for variant in VARIANTS.get(name, ()):
                out.append(Case(path.stem, name, tuple(sorted(variant.items()))))
    return out


@cache
def node_task() -> NodeTask:
    g = make_csbm(num_nodes=120, num_classes=3, num_features=8, seed=0)
    idx = torch.arange(g.num_nodes) % 3
    parts = []
    for k in range(3):
        nodes = (idx == k).nonzero().flatten()
        sub = g.subgraph(nodes)
        sub.global_id = nodes
        parts.append(sub)
    return NodeTask(clients=parts, num_features=8, num_classes=3, full_graph=g)


@cache
def graph_task() -> GraphTask:
    graphs = make_graph_classification(num_graphs=48, num_classes=2, min_nodes=4, max_nodes=8, seed=0)
    cap = min(max_degree(graphs), 8)
    graphs = degree_features(graphs, cap)
    train = [graphs[k:30:3] for k in range(3)]
    return GraphTask(train=train, val=[graphs[30:36]] * 3, test=[graphs[36:42]] * 3, global_test=graphs[42:],
                     num_features=cap + 1, num_classes=2)


@dataclass
class Run:
    """A one-round run, with where each exchange call of each tag began in its transcript."""

    fed: Federation
    records: list[Record]
    call_starts: dict[str, list[int]]


def run_once(case: Case, monkeypatch: pytest.MonkeyPatch) -> Run:
    mcls = method_class(case.method)
    task = node_task() if "node" in mcls.tasks else graph_task()
    options = {**next((v for k, v in FAST.items() if case.method.startswith(k)), {}), **dict(case.options)}
    cfg = MethodConfig(rounds=1, train=TrainConfig(lr=0.01, local_epochs=1), seed=0, hidden=8, options=options)
    method = mcls(task, cfg)
    fed = Federation(method.num_clients, ProtocolStack.load(protocols_dir() / f"{case.stack}.toml"), seed=0,
                     extra_parties=method.extra_parties, keep_payloads=False)
    starts: dict[str, list[int]] = defaultdict(list)
    for name in CALLS:
        monkeypatch.setattr(ServerContext, name, _marking(getattr(ServerContext, name), fed, starts))
    torch.manual_seed(0)
    RoundRunner(method, fed, rounds=getattr(method, "fixed_rounds", None) or 1, progress=False).run()
    return Run(fed, list(fed.transcript), dict(starts))


def _marking(fn: Any, fed: Federation, starts: dict[str, list[int]]) -> Any:
    def marked(self: ServerContext, tag: str, *args: Any, **kwargs: Any) -> Any:
        starts[tag].append(len(fed.transcript))
        return fn(self, tag, *args, **kwargs)

    return marked


def calls_of(records: Sequence[Record], starts: Sequence[int]) -> Iterator[list[Record]]:
    """``records`` (of one tag) cut where each of its exchange calls began."""
    cuts = sorted(starts)
    groups: dict[int, list[Record]] = defaultdict(list)
    for r in records:
        groups[sum(1 for c in cuts[1:] if c <= r.index)].append(r)
    yield from groups.values()


def transcript_readers(run: Run) -> dict[str, set[str]]:
    """Tag -> parties the transcript shows reading it (see the module docstring)."""
    by_tag: dict[str, list[Record]] = defaultdict(list)
    for r in run.records:
        by_tag[r.tag].append(r)
    out: dict[str, set[str]] = defaultdict(set)
    for tag, records in by_tag.items():
        for call in calls_of(records, run.call_starts.get(tag, [0])):
            last: dict[str, str] = {}
            held: set[str] = set()
            decrypted: set[str] = set()
            encrypted_by: set[str] = set()
            for r in call:
                if r.form in READABLE:
                    out[tag].add(r.receiver)
                    continue
                last[r.sender], last[r.receiver] = "passed on", "received"
                if r.form is not Form.KEYS:
                    held.add(r.receiver)
                if r.form is Form.CIPHERTEXT:
                    decrypted.add(r.receiver)
                    encrypted_by.add(r.sender)
            out[tag] |= {p for p in held if last[p] == "received"}
            # a ciphertext's end: it received ciphertexts and passed none on, so it decrypted them
            # (blind_robust's key holder seals what it decrypted on to the clients)
            out[tag] |= decrypted - encrypted_by
    return out


def receivers(run: Run) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for r in run.records:
        out[r.tag].add(r.receiver)
    return out


def reading_role_names(row: LedgerRow, run: Run, case: Case) -> set[str]:
    """The roles in which the ledger's readers of ``row`` read (a client may read as key holder)."""
    stack = run.fed.stack
    _, exposure, params = tag_exposure(stack, row.tag, method_class(case.method).TAGS)
    parties = {r.sender for r in run.records} | {r.receiver for r in run.records}
    out: set[str] = set()
    for p in row.readers:
        roles = roles_of(p, parties=parties, params=params)
        out |= reading_roles(exposure, roles) or roles
    return out


CASES = cases()


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_ledger_transcript_and_description_agree_on_who_reads_each_tag(case: Case,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_once(case, monkeypatch)
    stack = run.fed.stack
    ledger = {r.tag: r for r in exposure_ledger(run.records, stack=stack, kinds=method_class(case.method).TAGS)}
    seen, got = transcript_readers(run), receivers(run)
    text = normalized(stack.description)
    assert ledger.keys() == got.keys() and ledger
    kinds = method_class(case.method).TAGS
    for tag, row in ledger.items():
        assert row.undeclared == (), f"{tag}: {row.undeclared} read it though {row.mechanism} does not declare it"
        extra = set(row.readers) - seen[tag]
        if kinds[tag] is ExchangeKind.PEER_SUM:  # metadata cannot tell a call's target from its peers
            extra = {p for p in extra if is_client(p)}
        assert set(row.readers) - extra == seen[tag], f"{tag}: ledger readers {row.readers}, transcript {seen[tag]}"
        held = {p for ps in row.protected.values() for p in ps}
        assert held == got[tag] - seen[tag] - extra, f"{tag}: ledger holders {held}, transcript {got[tag] - seen[tag]}"
        said = described(stack.name, tag)
        assert said is not None, f"the description of {stack.name!r} says nothing of who reads {tag!r}"
        for quote in said.quotes:
            assert normalized(quote) in text, f"{stack.name!r} no longer says: {quote!r}"
        expected = set(got[tag]) if said.readers is None else said.readers
        actual = set(row.readers) if said.readers is None else reading_role_names(row, run, case)
        assert actual == expected, f"{tag}: ledger readers {actual}, description of {stack.name!r} {set(expected)}"


def test_every_case_runs_and_every_shipped_stack_is_covered() -> None:
    stems = {p.stem for p in protocols_dir().glob("*.toml")}
    assert {c.stack for c in CASES} == stems
    assert any(c.stack == "fedsheafhn_secure" and c.method == "fedsheafhn" for c in CASES)
    names = {ProtocolStack.load(p).name for p in protocols_dir().glob("*.toml")}
    assert names == set(DESCRIBED), "every shipped stack needs its description pinned in stack_descriptions.py"


def test_fedsheafhn_ledger_names_the_server_as_reader_and_the_shuffler_as_blind(monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_once(Case("fedsheafhn_secure", "fedsheafhn"), monkeypatch)
    rows = {r.tag: r for r in exposure_ledger(run.records, stack=run.fed.stack, kinds=method_class("fedsheafhn").TAGS)}
    for tag in ("fedsheafhn/embedding", "fedsheafhn/feedback"):
        assert rows[tag].opened_by == ("server",) and rows[tag].clear_readers == ()
        assert rows[tag].protected["sealed"] == ("shuffler",) and rows[tag].aggregate_only == ()
    weights = rows["fedsheafhn/weights"]
    assert weights.opened_by == ("client/0", "client/1", "client/2") and weights.protected == {"sealed": ("shuffler",)}


def test_every_mechanism_declares_what_each_role_reads_for_every_exchange_it_carries() -> None:
    import securefg.attacks  # noqa: F401  (registers the trimmed-mean defence)

    def shipped(kind: ExchangeKind) -> set[str]:  # test suites register stand-ins (e.g. tests/protocol/dp)
        return {n for n in mechanisms_for(kind) if mechanism_class(n).__module__.startswith("securefg.")}

    for kind in ExchangeKind:
        for name in shipped(kind):
            exposure = exposure_of(name, kind)
            assert exposure and set(exposure.values()) & READS, f"{name} / {kind.value}: nobody reads"
    assert {n for k in ExchangeKind for n in shipped(k)} <= declared_mechanisms()


def test_a_mechanism_without_a_declaration_cannot_be_put_in_a_ledger() -> None:
    with pytest.raises(ConfigError, match="'no_such_mechanism' declares no exposure, so no ledger can say who reads"):
        exposure_of("no_such_mechanism", ExchangeKind.AGGREGATE)
    with pytest.raises(ConfigError, match="'mailbox' does not carry exchange 'aggregate'"):
        exposure_of("mailbox", ExchangeKind.AGGREGATE)


def test_a_readable_envelope_outside_the_declaration_is_reported_as_undeclared() -> None:
    from securefg.federation.transcript import Transcript

    t = Transcript()
    t.append(round=0, tag="t", stage="leak", sender="client/0", receiver="shuffler", form=Form.PLAINTEXT,
             payload=b"x", wire_bytes=1)
    stack = ProtocolStack.from_dict({"name": "s", "tags": {"t": {"mechanism": "mailbox"}}})
    (row,) = exposure_ledger(t, stack=stack, kinds={"t": ExchangeKind.COLLECT})
    assert row.clear_readers == ("shuffler",) and row.undeclared == ("shuffler",)
