"""Settings that void a stack's guarantee are refused at load unless the stack says ``unsafe``."""

from __future__ import annotations

import math
from typing import Any

import pytest

from securefg.errors import ConfigError
from securefg.protocol.robust.options import robust_stack
from securefg.protocol.secure_sum.harary import choose_parameters
from securefg.protocol.secure_sum.settings import Settings
from securefg.protocol.secure_sum.threshold_bound import min_threshold
from securefg.protocol.stack import ProtocolStack, protocols_dir

SUM = {"bits": 64, "clip": 1e3}
DP = {"name": "dp_gaussian", "noise_multiplier": 1.0, "clip": 1.0}


def _stack(binding: dict[str, Any], **top: Any) -> ProtocolStack:
    return ProtocolStack.from_dict({"name": "user", "tags": {"t": binding}, **top})


def _sum(**params: Any) -> dict[str, Any]:
    return {"mechanism": "secure_sum", "params": {**SUM, **params}}


# --------------------------------------------------------------------- secure-sum threshold
@pytest.mark.parametrize("params", [{"threshold": 0.5}, {"threshold": 0.6}, {"threshold": 0.3, "signatures": True},
                                    {"threshold": 2, "degree": 4}, {"threshold": 4, "degree": 8},
                                    {"threshold": 5}, {"adversarial_rate": 0.5}])
def test_a_threshold_an_equivocating_server_beats_is_refused_at_load(params: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"voids protection 'secure_sum/equivocation_threshold'.*unsafe = "):
        _stack(_sum(**params))


@pytest.mark.parametrize("params", [{}, {"threshold": 0.7}, {"threshold": 1.0}, {"threshold": 3, "degree": 4},
                                    {"threshold": 0.55, "adversarial_rate": 0.0}, {"degree": 6}])
def test_a_threshold_above_half_plus_the_adversarial_rate_loads(params: dict[str, Any]) -> None:
    assert _stack(_sum(**params)).failed_protections == ()


@pytest.mark.parametrize("gamma", [0.0, 0.1, 0.2, 0.3, 0.45])
def test_min_threshold_is_the_smallest_count_no_split_of_honest_neighbours_reaches_twice(gamma: float) -> None:
    for k in range(1, 60):
        t = min_threshold(k, gamma)
        # equivocation needs t - c shares from each of two disjoint halves of the k - c honest neighbours
        for c in range(math.floor(2 * gamma * k) + 1):
            assert 2 * (t - c) > k - c, (k, t, c)
        assert t - 1 <= (0.5 + gamma) * k + 1e-9  # and no smaller count exceeds the bound


@pytest.mark.parametrize("n", [3, 10, 20, 50, 100, 200, 500])
def test_the_default_threshold_meets_the_bound_for_every_client_count(n: int) -> None:
    for gamma in (0.0, 0.1, 0.2):
        k, t = Settings(adversarial_rate=gamma).graph(n)
        assert t > (0.5 + gamma) * k or t == k == n - 1, (n, gamma, k, t)
        p = choose_parameters(n, adversarial_rate=gamma)
        if n >= 10:  # below, a 10% dropout is a whole neighbour of two: no (k, t) is reliable
            assert p.privacy_failure <= 2.0**-40 and p.reliability_failure <= 2.0**-30, (n, gamma, p)


def test_a_pinned_degree_without_threshold_defaults_to_the_bound() -> None:
    k, t = Settings(degree=10).graph(50)
    assert (k, t) == (10, 7)  # > 0.6 * 10; an honest majority alone (6) lets one colluder help split


def test_an_infinite_clip_is_refused_at_load_not_at_the_first_sum() -> None:
    with pytest.raises(ConfigError, match=r"'clip' must be a positive number, and finite .* got inf"):
        _stack(_sum(clip=math.inf))


# --------------------------------------------------------------------------------- DP noise
def test_seeded_dp_noise_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match=r"secure_rng = false.*voids protection 'dp_gaussian/secure_noise'"):
        _stack({"mechanism": "plaintext", "transforms": [{**DP, "secure_rng": False}]})


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_a_sampling_discount_without_sampling_is_refused_at_load(mode: str) -> None:
    with pytest.raises(ConfigError, match=r"sample_rate = 0.1.*voids protection 'dp_gaussian/sampling'"):
        _stack({"mechanism": "plaintext", "transforms": [{**DP, "mode": mode, "sample_rate": 0.1}]})


def test_local_noise_is_accounted_at_rate_one_so_its_sample_rate_voids_nothing() -> None:
    assert _stack({"mechanism": "plaintext",
                   "transforms": [{**DP, "mode": "local", "sample_rate": 0.1}]}).failed_protections == ()


# ------------------------------------------------------------------------------------- CKKS
def test_ckks_decryptions_without_output_noise_are_refused_at_load() -> None:
    with pytest.raises(ConfigError, match=r"output_noise = \"none\".*voids protection 'ckks/output_noise'"):
        _stack({"mechanism": "ckks", "params": {"output_noise": "none"}})


def test_a_personalized_ckks_tag_keeps_the_default_output_noise_and_loads() -> None:
    stack = ProtocolStack.load("fedpub_ckks")
    assert "output_noise" not in stack.binding_for("fedpub/weights").params
    assert stack.failed_protections == ()


# ----------------------------------------------------------------------------------- unsafe
def test_a_binding_marked_unsafe_loads_and_lists_each_failed_protection_with_its_reason() -> None:
    stack = _stack({"mechanism": "plaintext", "unsafe": "reproducible simulation",
                    "transforms": [{**DP, "secure_rng": False, "sample_rate": 0.5}]})
    assert [(f.protection, f.tag, f.reason) for f in stack.failed_protections] == [
        ("dp_gaussian/secure_noise", "t", "reproducible simulation"),
        ("dp_gaussian/sampling", "t", "reproducible simulation")]
    assert stack.failed_protections[0].to_json()["guarantee"].startswith("DP noise comes from the OS CSPRNG")


def test_a_stack_level_unsafe_covers_every_binding_and_a_binding_reason_wins() -> None:
    stack = ProtocolStack.from_dict({"name": "user", "unsafe": "benchmark", "tags": {
        "a": _sum(threshold=0.5), "b": {**_sum(threshold=0.5), "unsafe": "one-off test"}}})
    assert sorted((f.tag, f.reason) for f in stack.failed_protections) == [("a", "benchmark"), ("b", "one-off test")]


@pytest.mark.parametrize("value", ["", "  ", 1, True])
def test_unsafe_must_give_a_reason(value: object) -> None:
    with pytest.raises(ConfigError, match="'unsafe' must be a non-empty string"):
        _stack({**_sum(threshold=0.5), "unsafe": value})
    with pytest.raises(ConfigError, match="'unsafe' must be a non-empty string"):
        _stack(_sum(), unsafe=value)


def test_the_robust_option_keeps_the_inner_sums_waiver_and_refuses_it_without_one() -> None:
    with pytest.raises(ConfigError, match="equivocation_threshold"):
        _stack({"mechanism": "subgroup_robust", "params": {"inner_params": {**SUM, "threshold": 0.5}}})
    stack = _stack({**_sum(threshold=0.5), "unsafe": "study"})
    robust = robust_stack(stack, ("t",), rule="median", k=3)
    assert robust.binding_for("t").mechanism == "subgroup_robust"
    assert [(f.protection, f.reason) for f in robust.failed_protections] == [("secure_sum/equivocation_threshold", "study")]


def test_every_shipped_stack_loads_without_waiving_a_protection() -> None:
    for path in sorted(protocols_dir().glob("*.toml")):
        stack = ProtocolStack.load(path)
        assert stack.unsafe is None and stack.failed_protections == (), path.name
        assert all(b.unsafe is None for b in stack.bindings), path.name
