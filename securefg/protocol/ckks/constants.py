"""Stage names and state keys of the CKKS mechanisms, in one place (like Flower's ``Stage``)."""

from __future__ import annotations

#: State namespace shared by every CKKS mechanism (one key session per transport session).
NAMESPACE = "ckks"


class Stage:
    """Envelope ``stage`` values; the transcript groups traffic by them."""

    PUBLIC_CONTEXT = "ckks/keys/public"
    SECRET_CONTEXT = "ckks/keys/secret"
    UPLOAD = "ckks/upload"
    DECRYPT_REQUEST = "ckks/decrypt/request"
    DECRYPT_RESULT = "ckks/decrypt/result"
    PERSONALIZED_RESULT = "ckks/personalized/result"
    SIMILARITY_REQUEST = "ckks/similarity/request"
    SIMILARITY_RESULT = "ckks/similarity/result"


#: HKDF/AEAD label binding a sealed secret context to its purpose.
SECRET_CONTEXT_LABEL = b"securefg/ckks/secret-context/v1"
