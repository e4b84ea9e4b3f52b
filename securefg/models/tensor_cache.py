"""Values derived from a tensor, made once per tensor and dropped with it.

Why: full-batch training hands a model the same feature matrix and the same graph every epoch,
and some layers derive something costly from them (GraphSage's sparse view of the features, a
GCN's normalised adjacency). Keying by the tensor's identity and in-place version makes the value
again after an in-place edit, and ``weakref.finalize`` removes the entry when the tensor is freed,
before its ``id`` can be reused.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from torch import Tensor

T = TypeVar("T")

#: ``id(tensor) -> (tensor._version, {key: value})``, one such dict per kind of derived value.
TensorCache = dict[int, tuple[int, dict[Hashable, Any]]]


def derived(cache: TensorCache, tensor: Tensor, key: Hashable, make: Callable[[], T]) -> T:
    """``make()`` for ``(tensor, key)``, computed once per tensor and in-place version."""
    tensor_id = id(tensor)
    entry = cache.get(tensor_id)
    if entry is not None and entry[0] == tensor._version and key in entry[1]:
        return entry[1][key]
    value = make()
    if entry is None:
        weakref.finalize(tensor, cache.pop, tensor_id, None)
    if entry is None or entry[0] != tensor._version:
        entry = (tensor._version, {})
        cache[tensor_id] = entry
    entry[1][key] = value
    return value


__all__ = ["TensorCache", "derived"]
