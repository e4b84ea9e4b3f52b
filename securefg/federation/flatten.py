"""Flatten named tensors into one float64 vector and back.

Vector mechanisms (secure sums, CKKS) work on one 1-D vector; the layout (names, shapes,
dtypes) is public model metadata that both ends know.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from securefg.errors import InvalidInputError


@dataclass(frozen=True)
class Layout:
    """Names, shapes and dtypes of a flattened dict of tensors."""

    fields: tuple[tuple[str, tuple[int, ...], torch.dtype], ...]

    @property
    def size(self) -> int:
        return sum(math.prod(s) for _, s, _ in self.fields)

    @classmethod
    def of(cls, tensors: Mapping[str, torch.Tensor]) -> Layout:
        return cls(tuple((k, tuple(v.shape), v.dtype) for k, v in tensors.items()))


def flatten(tensors: Mapping[str, torch.Tensor], *, what: str = "input") -> tuple[torch.Tensor, Layout]:
    """Concatenate floating tensors into one float64 CPU vector.

    Raises:
        InvalidInputError: for non-floating tensors or NaN/Inf values.
    """
    parts = []
    for k, v in tensors.items():
        if not v.is_floating_point():
            raise InvalidInputError(f"{what}: {k!r} has dtype {v.dtype}; only floating tensors aggregate")
        if not torch.isfinite(v).all():
            raise InvalidInputError(f"{what}: {k!r} contains NaN or Inf")
        parts.append(v.detach().to("cpu", torch.float64).reshape(-1))
    vec = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)
    return vec, Layout.of(tensors)


def unflatten(vec: torch.Tensor, layout: Layout) -> dict[str, torch.Tensor]:
    """Split a vector back into named tensors of the layout's shapes and dtypes."""
    if vec.numel() != layout.size:
        raise InvalidInputError(f"vector of {vec.numel()} values does not fit a layout of {layout.size}")
    out, pos = {}, 0
    for name, shape, dtype in layout.fields:
        n = math.prod(shape)
        out[name] = vec[pos : pos + n].reshape(shape).to(dtype).clone()
        pos += n
    return out


def layout_to_text(layout: Layout) -> str:
    """The layout as compact public text (what a contributor reports to the server)."""
    import json

    return json.dumps([[name, list(shape), str(dtype).removeprefix("torch.")] for name, shape, dtype in layout.fields],
                      separators=(",", ":"))


def layout_from_text(text: str, *, what: str = "layout") -> Layout:
    """Inverse of :func:`layout_to_text`; the text came over the network, so every field is checked.

    Raises:
        InvalidInputError: Malformed text, a negative dimension or a non-floating dtype.
    """
    import json

    try:
        raw = json.loads(text)
        fields = []
        for name, shape, dtype in raw:
            dt = getattr(torch, str(dtype), None)
            if not isinstance(name, str) or not isinstance(dt, torch.dtype) or not dt.is_floating_point:
                raise ValueError(f"field {name!r} has dtype {dtype!r}")
            dims = tuple(int(d) for d in shape)
            if any(d < 0 for d in dims):
                raise ValueError(f"field {name!r} has a negative dimension")
            fields.append((name, dims, dt))
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"{what} is malformed: {exc}") from exc
    return Layout(tuple(fields))
