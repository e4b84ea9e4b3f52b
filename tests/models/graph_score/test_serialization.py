import pytest
import torch

from securefg.errors import ConfigError, InvalidInputError
from securefg.models.graph_score import GraphDiffusionModel, LangevinParams
from tests.models.graph_score.conftest import complete_bipartite, cycle


@pytest.fixture(scope="module")
def trained() -> GraphDiffusionModel:
    model = GraphDiffusionModel(
        num_classes=2,
        max_node_num=10,
        init_seed=3,
        sampling=LangevinParams(steps_per_level=2, step_ratio=0.03, noise_factor=0.7),
    )
    model.fit([cycle(5), cycle(7), complete_bipartite(2, 3)], [0, 0, 1], epochs=2, generator=0)
    return model


def test_round_trip_gives_identical_samples(trained) -> None:
    tensors = trained.to_tensors()
    snapshot = {k: v.clone() for k, v in tensors.items()}
    clone = GraphDiffusionModel.from_tensors(tensors)
    assert all(torch.equal(tensors[k], snapshot[k]) for k in tensors)  # input left unchanged
    assert clone.sampling == trained.sampling and clone.sigmas == trained.sigmas
    assert torch.equal(clone.node_count_hist, trained.node_count_hist)
    a = trained.sample(4, labels=[0, 1, 0, 1], generator=torch.Generator().manual_seed(5))
    b = clone.sample(4, labels=[0, 1, 0, 1], generator=torch.Generator().manual_seed(5))
    assert [g.num_nodes for g in a] == [g.num_nodes for g in b]
    assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a, b, strict=True))


def test_payload_is_flat_named_tensors_of_codec_friendly_dtypes(trained) -> None:
    tensors = trained.to_tensors()
    assert {v.dtype for v in tensors.values()} == {torch.int64, torch.float64, torch.float32}
    assert int(tensors["num_classes"]) == 2 and int(tensors["class_label"]) == -1
    assert tensors["node_count_hist"].tolist()[1][5] == 1
    params = sum(v.numel() for k, v in tensors.items() if k.startswith("param."))
    assert params == trained.num_parameters


def test_from_tensors_rejects_a_tampered_weight_shape(trained) -> None:
    tensors = trained.to_tensors()
    tensors["param.readout.linears.0.weight"] = torch.zeros(24, 13)
    with pytest.raises(
        InvalidInputError,
        match=r"param\.readout\.linears\.0\.weight: shape \(24, 13\), expected \(24, 12\)",
    ):
        GraphDiffusionModel.from_tensors(tensors)


def test_from_tensors_names_missing_and_unexpected_fields(trained) -> None:
    tensors = trained.to_tensors()
    del tensors["sigmas"]
    tensors["evil"] = torch.zeros(1)
    with pytest.raises(InvalidInputError, match=r"(?s)unexpected field 'evil'.*missing fields \['sigmas'\]"):
        GraphDiffusionModel.from_tensors(tensors)


def test_from_tensors_rejects_a_missing_weight(trained) -> None:
    tensors = trained.to_tensors()
    del tensors["param.layers.0.gin.eps"]
    with pytest.raises(InvalidInputError, match=r"missing parameters \['layers.0.gin.eps'\]"):
        GraphDiffusionModel.from_tensors(tensors)


def test_from_tensors_rejects_a_wrong_header_dtype(trained) -> None:
    tensors = trained.to_tensors()
    tensors["max_node_num"] = tensors["max_node_num"].float()
    with pytest.raises(InvalidInputError, match=r"max_node_num: dtype torch.float32, expected torch.int64"):
        GraphDiffusionModel.from_tensors(tensors)


def test_from_tensors_rejects_non_finite_weights(trained) -> None:
    tensors = trained.to_tensors()
    tensors["param.layers.1.gin.eps"] = torch.tensor([float("nan"), 0.0])
    with pytest.raises(InvalidInputError, match=r"param\.layers\.1\.gin\.eps: contains NaN or Inf"):
        GraphDiffusionModel.from_tensors(tensors)


def test_from_tensors_rejects_an_oversized_architecture_before_allocating(trained) -> None:
    tensors = trained.to_tensors()
    tensors["config.node_features"] = torch.tensor(10**9)
    with pytest.raises(ConfigError, match=r"node_features=1000000000 not in \[1, 256\]"):
        GraphDiffusionModel.from_tensors(tensors)


def test_from_tensors_rejects_conditions_that_do_not_match_classes_and_levels(trained) -> None:
    tensors = trained.to_tensors()
    tensors["config.num_conditions"] = torch.tensor(6)
    with pytest.raises(ConfigError, match="config.num_conditions=6, expected 12"):
        GraphDiffusionModel.from_tensors(tensors)


def test_from_tensors_rejects_a_histogram_of_the_wrong_shape(trained) -> None:
    tensors = trained.to_tensors()
    tensors["node_count_hist"] = torch.ones(1, 11, dtype=torch.int64)
    with pytest.raises(ConfigError, match=r"node_count_hist: shape \(1, 11\), expected \(2, 11\)"):
        GraphDiffusionModel.from_tensors(tensors)


def test_from_tensors_rejects_bad_sampling_params(trained) -> None:
    tensors = trained.to_tensors()
    tensors["sampling.step_ratio"] = torch.tensor(float("inf"), dtype=torch.float64)
    with pytest.raises(ConfigError, match=r"step_ratio=inf not in \(0, 1\]"):
        GraphDiffusionModel.from_tensors(tensors)


def test_flat_parameters_round_trip_and_average(trained) -> None:
    vec = trained.flat_parameters()
    assert vec.shape == (trained.num_parameters,) and vec.dtype == torch.float32
    other = GraphDiffusionModel(num_classes=2, max_node_num=10, init_seed=99)
    other.load_flat_parameters(vec)
    assert torch.equal(other.flat_parameters(), vec)
    fresh = GraphDiffusionModel(num_classes=2, max_node_num=10, init_seed=3).flat_parameters()
    other.load_flat_parameters(0.5 * (vec + fresh))  # what CeFGC+ does in HE
    assert torch.allclose(other.flat_parameters(), 0.5 * (vec + fresh))


def test_load_flat_parameters_rejects_a_wrong_length(trained) -> None:
    expected = rf"expected a 1-D tensor of {trained.num_parameters} parameters, got \(5,\)"
    with pytest.raises(InvalidInputError, match=expected):
        trained.load_flat_parameters(torch.zeros(5))


def test_shared_init_seed_gives_identical_models() -> None:
    a = GraphDiffusionModel(max_node_num=8, init_seed=42).flat_parameters()
    b = GraphDiffusionModel(max_node_num=8, init_seed=42).flat_parameters()
    c = GraphDiffusionModel(max_node_num=8, init_seed=43).flat_parameters()
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_model_crosses_the_wire_codec_byte_for_byte(trained) -> None:
    from securefg.federation.codec import decode_tensors, encode_tensors

    wire = encode_tensors(trained.to_tensors())
    received = GraphDiffusionModel.from_tensors(decode_tensors(wire))
    assert encode_tensors(received.to_tensors()) == wire


def test_round_trip_keeps_the_common_neighbors_option() -> None:
    from securefg.models.graph_score import EDPScoreConfig

    model = GraphDiffusionModel(config=EDPScoreConfig(common_neighbors=True), max_node_num=8, init_seed=1)
    clone = GraphDiffusionModel.from_tensors(model.to_tensors())
    assert clone.config.common_neighbors and torch.equal(clone.flat_parameters(), model.flat_parameters())


def test_from_tensors_rejects_a_non_boolean_option(trained) -> None:
    tensors = trained.to_tensors()
    tensors["config.common_neighbors"] = torch.tensor(2)
    with pytest.raises(ConfigError, match="config.common_neighbors=2 must be 0 or 1"):
        GraphDiffusionModel.from_tensors(tensors)
