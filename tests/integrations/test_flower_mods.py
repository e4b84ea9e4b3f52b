"""securefg_mod + SecureFedAvgWorkflow on a Flower app, through an in-process Grid (fast)."""

import uuid

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.common.serde import recorddict_from_proto, recorddict_to_proto  # noqa: E402
from flwr.serverapp.grid import Grid  # noqa: E402
from flwr.supercore.run import Run  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from securefg.errors import CodecError, ProtocolError  # noqa: E402
from securefg.integrations.flower.grid import tunnel_pack, tunnel_unpack  # noqa: E402
from securefg.integrations.flower.mods import enable_securefg, securefg_mod  # noqa: E402
from securefg.integrations.flower.records import Step, step_from_content, step_to_content  # noqa: E402
from securefg.integrations.flower.workflow import SecureFedAvgWorkflow  # noqa: E402

TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 0


class DirectGrid(Grid):
    """Delivers each message to its node's ClientApp in this process, serialized both ways."""

    def __init__(self, apps, dead=(), garble=()):
        self.apps, self.dead, self.garble = apps, set(dead), set(garble)
        self.ctx = {n: Context(run_id=1, node_id=n, node_config={}, state=RecordDict(), run_config={}) for n in apps}
        self.server_saw: list[RecordDict] = []

    def set_run(self, run_id):
        pass

    @property
    def run(self):
        return Run.create_empty(1)

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        return Message(content, dst_node_id=dst_node_id, message_type=message_type)

    def get_node_ids(self):
        return list(self.apps)

    def push_messages(self, messages):
        raise NotImplementedError

    def pull_messages(self, message_ids):
        raise NotImplementedError

    def send_and_receive(self, messages, *, timeout=None):
        out = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            n = msg.metadata.dst_node_id
            if n in self.dead and msg.metadata.message_type == "train":
                self.dead.discard(n)
                self.apps[n] = None  # it crashes while training and never comes back
            if self.apps[n] is None:
                from flwr.app.error import Error

                out.append(Message(Error(code=0, reason="node gone"), reply_to=msg))
                continue
            got = Message(recorddict_from_proto(recorddict_to_proto(msg.content)), dst_node_id=n,
                          message_type=msg.metadata.message_type)
            got.metadata.__dict__["_message_id"] = msg.metadata.message_id
            rep = self.apps[n](got, self.ctx[n])
            content = recorddict_from_proto(recorddict_to_proto(rep.content))
            if n in self.garble and "masked_input" in str(msg.content.config_records.get("securefg", {}).get("stage")):
                from flwr.app import ConfigRecord

                content = RecordDict({"securefg": ConfigRecord({"action": "aggregate", "round": "zero"})})
            self.server_saw.append(content)
            out.append(Message(content, reply_to=msg))
        return out


def make_app(vec, n_examples):
    app = ClientApp(mods=[securefg_mod])
    enable_securefg(app)

    @app.train()
    def train(msg, context):
        w = msg.content["arrays"]["w"].numpy()
        arrays = ArrayRecord({"w": Array((w + vec).astype(np.float32))})
        return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": n_examples})}),
                       reply_to=msg)

    return app


def test_secure_fedavg_returns_the_weighted_mean_and_the_server_never_sees_an_update():
    rng = np.random.default_rng(0)
    vecs = {n: rng.normal(size=50).astype(np.float32) for n in (11, 12, 13, 14)}
    sizes = {11: 10, 12: 30, 13: 20, 14: 40}
    grid = DirectGrid({n: make_app(v, sizes[n]) for n, v in vecs.items()})
    wf = SecureFedAvgWorkflow()
    wf.setup(grid)
    start = ArrayRecord({"w": Array(np.ones(50, dtype=np.float32))})
    out, n = wf.train_round(grid, start, round=0)
    expected = 1 + sum(sizes[k] * vecs[k] for k in vecs) / sum(sizes.values())
    assert n == 4
    np.testing.assert_allclose(out["w"].numpy(), expected, atol=1e-5)
    assert all(not c.array_records for c in grid.server_saw)  # only metrics and sealed wires came back


def test_the_plaintext_stack_gives_the_same_mean_and_shows_the_updates_to_the_server():
    rng = np.random.default_rng(1)
    vecs = {n: rng.normal(size=20).astype(np.float32) for n in (1, 2, 3)}
    means = []
    for stack in ("fedavg_secure_sum", "plaintext"):
        grid = DirectGrid({n: make_app(v, n) for n, v in vecs.items()})
        wf = SecureFedAvgWorkflow(stack=stack)
        wf.setup(grid)
        out, _ = wf.train_round(grid, ArrayRecord({"w": Array(np.zeros(20, dtype=np.float32))}), round=0)
        means.append(out["w"].numpy())
    np.testing.assert_allclose(means[0], means[1], atol=1e-6)
    np.testing.assert_allclose(means[1], sum(n * vecs[n] for n in vecs) / 6, atol=1e-6)
    # what each client sent under the plaintext stack: its update, in the clear, to the server
    from securefg.integrations.flower.mods import _CLIENTS

    for n in vecs:
        (rec,) = _CLIENTS[(1, n)][0].transport.transcript.records(tag="fedavg/update")
        assert (rec.stage, rec.form.value, rec.receiver) == ("plaintext/upload", "plaintext", "server")


def test_a_dp_stack_clips_and_noises_the_sum_and_the_server_ledger_records_the_release():
    from securefg.protocol.dp.accountant import STATE_KEY

    vecs = {n: np.full(30, 10.0, dtype=np.float32) for n in (1, 2, 3)}  # norm >> clip = 1
    grid = DirectGrid({n: make_app(v, 1) for n, v in vecs.items()})
    wf = SecureFedAvgWorkflow(stack="fedavg_dp")
    wf.setup(grid)
    out, n = wf.train_round(grid, ArrayRecord({"w": Array(np.zeros(30, dtype=np.float32))}), round=0)
    got = out["w"].numpy()
    assert n == 3 and np.abs(got - 10.0).min() > 5  # clipped to norm 1, far from the raw mean 10
    assert 0 < np.linalg.norm(got) < 3  # norm-1 mean plus noise of std 0.3 * 1 / 3 per value
    assert STATE_KEY in wf.rt.party.state  # the central release is in the server's ledger


def test_a_node_that_dies_in_training_is_dropped_and_the_mean_is_over_the_survivors():
    vecs = {n: np.full(8, float(n), dtype=np.float32) for n in (1, 2, 3, 4, 5)}
    grid = DirectGrid({n: make_app(v, 1) for n, v in vecs.items()}, dead={5})
    wf = SecureFedAvgWorkflow()
    wf.setup(grid)
    out, n = wf.train_round(grid, ArrayRecord({"w": Array(np.zeros(8, dtype=np.float32))}), round=0)
    assert n == 4 and "client/4" in wf.rt.dropped
    np.testing.assert_allclose(out["w"].numpy(), np.full(8, 2.5), atol=1e-5)


def test_a_node_sending_a_malformed_reply_is_dropped_and_the_others_are_summed():
    vecs = {n: np.full(4, float(n), dtype=np.float32) for n in (1, 2, 3, 4)}
    grid = DirectGrid({n: make_app(v, 1) for n, v in vecs.items()}, garble={2})
    wf = SecureFedAvgWorkflow()
    wf.setup(grid)
    out, n = wf.train_round(grid, ArrayRecord({"w": Array(np.zeros(4, dtype=np.float32))}), round=0)
    assert "malformed reply" in wf.rt.dropped["client/1"] and "secure_sum/masked_input" in wf.rt.dropped["client/1"]
    assert n == 3
    np.testing.assert_allclose(out["w"].numpy(), np.full(4, (1 + 3 + 4) / 3), atol=1e-5)


def test_train_before_setup_is_refused_with_a_clear_error():
    app = make_app(np.zeros(2, dtype=np.float32), 1)
    msg = Message(RecordDict({"arrays": ArrayRecord({"w": Array(np.zeros(2, dtype=np.float32))}),
                              "securefg": __import__("flwr.app", fromlist=["ConfigRecord"]).ConfigRecord(
                                  {"tag": "fedavg/update", "round": 0})}),
                  dst_node_id=99, message_type="train")
    msg.metadata.__dict__["_message_id"] = "x"
    with pytest.raises(ProtocolError, match="before hello"):
        app(msg, Context(run_id=1, node_id=99, node_config={}, state=RecordDict(), run_config={}))


def test_tunnel_round_trips_a_message_and_rejects_garbage():
    content = step_to_content(Step("aggregate", 3, "t", "s", (b"a", b"bc"), {"seq": 4}))
    mtype, back = tunnel_unpack(tunnel_pack("query.securefg", content))
    assert mtype == "query.securefg" and step_from_content(back) == Step("aggregate", 3, "t", "s", (b"a", b"bc"), {"seq": 4})
    with pytest.raises(CodecError, match="does not parse"):
        tunnel_unpack({"__type": "query.securefg", "__content": b"\xff\x00garbage"})
    with pytest.raises(CodecError, match="lacks its type"):
        tunnel_unpack({"__content": b""})


def test_a_ckks_stack_gives_the_plaintext_mean_and_the_server_sees_only_ciphertexts():
    pytest.importorskip("tenseal")
    rng = np.random.default_rng(2)
    vecs = {n: rng.normal(size=40).astype(np.float32) for n in (1, 2, 3)}
    grid = DirectGrid({n: make_app(v, n) for n, v in vecs.items()})
    wf = SecureFedAvgWorkflow(stack="fedavg_ckks")
    wf.setup(grid)
    out, n = wf.train_round(grid, ArrayRecord({"w": Array(np.zeros(40, dtype=np.float32))}), round=0)
    assert n == 3
    # CKKS error and the key holder's 2^-20 flooding, divided by the weight total 6
    np.testing.assert_allclose(out["w"].numpy(), sum(n * vecs[n] for n in vecs) / 6, atol=1e-5)
    from securefg.integrations.flower.mods import _CLIENTS
    from securefg.protocol.ckks.public_context import PublicContext

    # the lowest client holds the key: it sent the server a public context and the flooded sum
    holder_sent = {(r.stage, r.receiver, r.form.value) for r in _CLIENTS[(1, 1)][0].transport.transcript}
    assert ("ckks/keys/public", "server", "keys") in holder_sent and ("ckks/decrypt/result", "server", "aggregate") in holder_sent
    for node in (2, 3):  # the others uploaded ciphertexts only
        sent = {(r.tag, r.stage, r.form.value) for r in _CLIENTS[(1, node)][0].transport.transcript}
        assert sent == {("fedavg/update", "ckks/upload", "ciphertext")}
    contexts = list(wf.rt.party.state["mech/ckks"]["keys"].values())
    assert contexts and all(isinstance(c, PublicContext) and c.is_public() for c in contexts)
