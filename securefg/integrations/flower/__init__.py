"""securefg over Flower: our parties as Flower ServerApp/ClientApp processes over gRPC.

Flower is the transport: every securefg envelope, sealed by the sender's channel endpoint,
travels as bytes inside a Flower ``Message``; the protocol layer (secure sum, CKKS, DP) is
ours and unchanged. Install with ``pip install "securefg[flower]"``.
"""

from __future__ import annotations


def require_flwr() -> None:
    """Raise an ``ImportError`` naming the extra when ``flwr`` is missing."""
    try:
        import flwr  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the Flower backend needs the 'flwr' package: pip install \"securefg[flower]\""
        ) from exc
