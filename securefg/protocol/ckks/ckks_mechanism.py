"""The ``ckks`` mechanism: CKKS homomorphic encryption via TenSEAL for vector exchanges.

Carries ``aggregate`` (:mod:`.aggregate`), ``personalized_aggregate`` (:mod:`.personalized`) and
``similarity`` (:mod:`.similarity`); each module's docstring states exactly who learns what. Key
roles and their one-time distribution are in :mod:`.key_setup`.

Stack parameters::

    [tags."fedavg/update"]
    mechanism = "ckks"
    params = { preset = "default", output_noise = "flood", flood_std = 9.5367431640625e-07 }
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.protocol.ckks.aggregate import encrypted_sum
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.personalized import personalized_sums
from securefg.protocol.ckks.presets import CKKSPreset, preset_problems, resolve_preset
from securefg.protocol.ckks.similarity import encrypted_similarity
from securefg.protocol.guarantees import Voided
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, SumOutcome, register_mechanism

#: Parameters every CKKS-based mechanism accepts (``ckks`` and ``ckks_relay``).
CKKS_KEY_DEFAULTS: Mapping[str, Any] = {
    "preset": "default",
    "poly_modulus_degree": None,
    "coeff_mod_bit_sizes": None,
    "scale_bits": None,
    "key_holder": None,
}


def ckks_key_problems(params: Mapping[str, Any]) -> list[str]:
    """Problems with the preset / custom parameters / key holder part of ``params``."""
    problems = preset_problems(params)
    holder = params.get("key_holder")
    if holder is not None and not isinstance(holder, str):
        problems.append(f"key_holder must be a party id string, got {holder!r}")
    if holder == "server":
        problems.append("key_holder cannot be the server: it must never hold the CKKS secret key")
    return problems


@register_mechanism
class CKKS(Mechanism):
    """CKKS homomorphic encryption (TenSEAL) for ``aggregate``, ``personalized_aggregate``, ``similarity``.

    Args:
        preset (str): ``"default"`` (N=8192, [60,40,40,60], 2^40) or ``"deep"`` (N=16384, four
            levels). (default: ``"default"``)
        poly_modulus_degree (int, optional): Custom parameters instead of a preset (give all three
            of it, ``coeff_mod_bit_sizes`` and ``scale_bits``); checked for 128-bit security.
        key_holder (str, optional): Client that holds the secret key when there is no
            ``keyholder`` party. (default: the lowest-numbered client)
        output_noise (str): What the key holder does to values it decrypts for the server:
            ``"flood"``, ``"round"`` or ``"none"``. (default: ``"flood"``)
        flood_std (float): Flooding noise standard deviation. (default: ``2**-20``)
        round_bits (int): Fractional bits kept by ``"round"``. (default: ``20``)
        rerandomize (bool): Rerandomize personalized results before sending them. (default: ``False``)
    """

    name = "ckks"
    exchanges = frozenset(
        {ExchangeKind.AGGREGATE, ExchangeKind.PERSONALIZED_AGGREGATE, ExchangeKind.SIMILARITY}
    )
    defaults: ClassVar[Mapping[str, Any]] = {
        **CKKS_KEY_DEFAULTS,
        "output_noise": "flood",
        "flood_std": 2.0**-20,
        "round_bits": 20,
        "rerandomize": False,
    }
    protects = "ciphertext: the server sees CKKS ciphertexts and the released aggregate only"
    reveals_individual_inputs = False

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.preset: CKKSPreset = resolve_preset(self.params)
        self.keys = CKKSKeySetup(self.preset, key_holder=self.params["key_holder"])
        self.noise = OutputNoise(
            self.params["output_noise"], flood_std=self.params["flood_std"], round_bits=self.params["round_bits"]
        )

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        """Unknown keys, insecure presets, bad noise options: one message per problem."""
        problems = super().validate_params(params)
        merged = {**cls.defaults, **params}
        problems += ckks_key_problems(merged)
        problems += OutputNoise.problems(merged["output_noise"], merged["flood_std"], merged["round_bits"])
        if not isinstance(merged["rerandomize"], bool):
            problems.append(f"rerandomize must be true or false, got {merged['rerandomize']!r}")
        return problems

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """``output_noise = "none"``: exact decryptions of aggregates and similarities reach the
        server, which holds their ciphertexts and could solve for the secret key
        (:mod:`~securefg.protocol.ckks.output_noise`). A personalized aggregate never applies
        output noise (its receiver holds the key and the server never sees the decryption), so
        leave the option out on such a tag rather than set it to ``"none"``."""
        if {**cls.defaults, **params}["output_noise"] != "none":
            return []
        return [Voided("ckks/output_noise", "output_noise = \"none\" releases exact CKKS decryptions of aggregates and "
                       "similarities to the server, which holds the ciphertexts; use \"flood\" (the default). On a "
                       "personalized_aggregate tag the option has no effect: leave it out")]

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        """See :mod:`securefg.protocol.ckks.aggregate`."""
        return encrypted_sum(call, self.keys, inputs, self.noise)

    def run_personalized_aggregate(
        self,
        call: ExchangeCall,
        inputs: Mapping[str, torch.Tensor],
        coefficients: Mapping[str, Mapping[str, float]],
    ) -> dict[str, torch.Tensor]:
        """See :mod:`securefg.protocol.ckks.personalized`."""
        return personalized_sums(call, self.keys, inputs, coefficients, rerandomize=self.params["rerandomize"])

    def run_similarity(
        self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor], metric: str
    ) -> dict[tuple[str, str], float]:
        """See :mod:`securefg.protocol.ckks.similarity`."""
        return encrypted_similarity(call, self.keys, inputs, metric, self.noise)
