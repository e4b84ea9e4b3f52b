"""Side inputs of an ``aggregate`` (public counts next to the weight) bypass clipping and noise."""

import pytest
import torch

from securefg.errors import InvalidInputError


def test_side_sums_are_exact_while_the_inputs_are_clipped_and_noised(make_stack, make_exchange):
    stack = make_stack("test_masked_sum", dp_gaussian={"mode": "central", "noise_multiplier": 5.0, "clip": 1.0})
    ex = make_exchange(stack, n=3)
    inputs = {c: {"x": torch.full((8,), 10.0)} for c in ex.clients}
    side = {c: {"owners": torch.tensor([1.0, float(k)])} for k, c in enumerate(ex.clients)}
    out = ex.aggregate("u", inputs, mean=False, side=side)
    assert torch.equal(out["owners"], torch.tensor([3.0, 3.0], dtype=out["owners"].dtype))
    # each input was clipped to norm 1 and the sum noised: nowhere near 3 * 10
    assert float(out["x"].abs().max()) < 29.0 and not torch.allclose(out["x"], out["x"][0].expand(8))


def test_side_inputs_must_cover_the_same_clients_and_not_reuse_names(make_stack, make_exchange):
    ex = make_exchange(make_stack("plaintext"), n=2)
    inputs = {c: {"x": torch.ones(2)} for c in ex.clients}
    with pytest.raises(InvalidInputError, match="side inputs from"):
        ex.aggregate("u", inputs, side={ex.clients[0]: {"n": torch.ones(1)}})
    with pytest.raises(InvalidInputError, match="also input names"):
        ex.aggregate("u", inputs, side={c: {"x": torch.ones(1)} for c in ex.clients})
    mean = ex.aggregate("u", inputs, weights={c: 2.0 for c in ex.clients}, side={c: {"n": torch.ones(1)} for c in ex.clients})
    assert torch.allclose(mean["x"], torch.ones(2, dtype=mean["x"].dtype)) and float(mean["n"]) == 2.0  # never divided
