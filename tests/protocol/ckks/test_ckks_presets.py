"""CKKS presets: 128-bit security checks, pinned against SEAL's own table."""

from __future__ import annotations

import pytest
import tenseal as ts

from securefg.errors import ConfigError
from securefg.protocol.ckks.presets import MAX_LOG_Q_128, PRESETS, CKKSPreset, resolve_preset
from securefg.protocol.mechanism import mechanism_class
from securefg.protocol.stack import ProtocolStack


def test_default_preset_is_the_measured_recommendation() -> None:
    p = resolve_preset({})
    assert (p.poly_modulus_degree, p.coeff_mod_bit_sizes, p.scale_bits) == (8192, (60, 40, 40, 60), 40)
    assert p.slots == 4096 and p.levels == 2 and p.headroom_bits == 20


def test_deep_preset_has_more_levels_and_stays_below_the_bound() -> None:
    p = resolve_preset({"preset": "deep"})
    assert p.poly_modulus_degree == 16384 and p.levels == 4
    assert sum(p.coeff_mod_bit_sizes) <= MAX_LOG_Q_128[16384]


def test_every_shipped_preset_is_accepted_by_seal_at_128_bits() -> None:
    for preset in PRESETS.values():
        assert preset.problems() == []
        ts.context(ts.SCHEME_TYPE.CKKS, preset.poly_modulus_degree, coeff_mod_bit_sizes=list(preset.coeff_mod_bit_sizes))


def test_unknown_preset_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"Could not resolve CKKS preset 'tiny' among choices \['deep', 'default'\]"):
        resolve_preset({"preset": "tiny"})


def test_modulus_above_the_128_bit_bound_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"total 240 bits, above the 218-bit maximum for 128-bit security"):
        resolve_preset({"poly_modulus_degree": 8192, "coeff_mod_bit_sizes": [60, 60, 60, 60], "scale_bits": 60})


def test_our_bound_agrees_with_seal_one_bit_either_side() -> None:
    # Independent source: SEAL refuses (ValueError) what exceeds its tc128 table.
    ok = CKKSPreset("edge", 8192, (60, 49, 49, 60), 49)  # 218 bits: the maximum
    assert ok.problems() == []
    ts.context(ts.SCHEME_TYPE.CKKS, 8192, coeff_mod_bit_sizes=[60, 49, 49, 60])
    over = CKKSPreset("over", 8192, (60, 50, 49, 60), 49)  # 219 bits
    assert any("above the 218-bit maximum" in p for p in over.problems())
    with pytest.raises(ValueError, match="encryption parameters are not set correctly"):
        ts.context(ts.SCHEME_TYPE.CKKS, 8192, coeff_mod_bit_sizes=[60, 50, 49, 60])


def test_small_scale_is_rejected_as_too_imprecise() -> None:
    with pytest.raises(ConfigError, match=r"scale_bits=20 is below 30"):
        resolve_preset({"poly_modulus_degree": 4096, "coeff_mod_bit_sizes": [40, 20, 40], "scale_bits": 20})


def test_rescaling_primes_must_match_the_scale() -> None:
    with pytest.raises(ConfigError, match=r"rescaling primes \[50\] must all equal scale_bits=40"):
        resolve_preset({"poly_modulus_degree": 8192, "coeff_mod_bit_sizes": [60, 50, 60], "scale_bits": 40})


def test_non_power_of_two_degree_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"poly_modulus_degree=6000 is not one of"):
        resolve_preset({"poly_modulus_degree": 6000, "coeff_mod_bit_sizes": [60, 40, 60], "scale_bits": 40})


def test_partial_custom_parameters_name_what_is_missing() -> None:
    with pytest.raises(ConfigError, match=r"missing \['coeff_mod_bit_sizes', 'scale_bits'\]"):
        resolve_preset({"poly_modulus_degree": 8192})


def test_stack_file_with_insecure_ckks_parameters_fails_at_load_time() -> None:
    data = {
        "name": "bad",
        "tags": {
            "x/update": {"mechanism": "ckks", "params": {"preset": "fast"}},
            "x/other": {"mechanism": "ckks", "params": {"output_noise": "loud", "colour": 1}},
        },
    }
    with pytest.raises(ConfigError, match=r"invalid protocol stack <memory>") as info:
        ProtocolStack.from_dict(data)
    msg = str(info.value)
    assert "Could not resolve CKKS preset 'fast'" in msg
    assert "Could not resolve output_noise 'loud'" in msg
    assert "unknown parameter 'colour'" in msg


def test_key_holder_cannot_be_the_server() -> None:
    with pytest.raises(ConfigError, match="key_holder cannot be the server"):
        mechanism_class("ckks")(key_holder="server")
