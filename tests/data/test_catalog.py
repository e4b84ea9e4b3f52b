import pytest

from securefg.data.catalog import CATALOG, get_spec
from securefg.errors import ConfigError


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("cora", "Cora"),
        ("CITESEER", "CiteSeer"),
        ("imdb_binary", "IMDB-BINARY"),
        ("ptc-mr", "PTC_MR"),
        ("film", "Actor"),
        ("amazon_ratings", "Amazon-ratings"),
        ("  Photo ", "Photo"),
    ],
)
def test_names_resolve_case_insensitively(given: str, canonical: str) -> None:
    assert get_spec(given).name == canonical


def test_unknown_name_lists_the_choices() -> None:
    with pytest.raises(
        ConfigError, match=r"Could not resolve dataset 'coraa' among choices \[.*'Cora'.*'MUTAG'"
    ):
        get_spec("coraa")


def test_unknown_node_name_lists_only_node_choices() -> None:
    with pytest.raises(ConfigError, match="choices") as info:
        get_spec("nope", kind="node")
    assert "'Cora'" in str(info.value) and "'MUTAG'" not in str(info.value)


def test_graph_dataset_refused_by_node_kind_with_pointer_to_right_loader() -> None:
    with pytest.raises(ConfigError, match=r"'MUTAG' is a graph-level dataset.*load_graph_dataset"):
        get_spec("mutag", kind="node")


def test_catalog_covers_every_requested_dataset() -> None:
    wanted = {
        "Cora", "CiteSeer", "PubMed", "Computers", "Photo", "CS", "Physics", "chameleon", "squirrel",
        "Actor", "Minesweeper", "Amazon-ratings", "MUTAG", "PROTEINS", "ENZYMES", "NCI1", "DD",
        "IMDB-BINARY", "IMDB-MULTI", "COX2", "BZR", "DHFR", "PTC_MR", "AIDS",
    }  # fmt: skip
    assert set(CATALOG) == wanted
