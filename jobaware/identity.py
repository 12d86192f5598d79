"""A service proves that it is the deployment's own on every answer, so that a process that bound a service's port
first (any local user can, on a login node's loopback) cannot answer for it.

The deployment's services and their clients share a secret (`config.service_token()`, a 0640 file). A client that
has it sends a fresh random nonce with each request (`NONCE`); a service that has it answers with `PROOF`,
HMAC-SHA256(secret, nonce || SHA-256(answer body)), over every answer it gives, errors and probes included. A client
with the secret refuses an answer without a valid proof as it would an outage. The secret never crosses the wire,
a proof is good for one nonce only, and the body it covers cannot be changed.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

NONCE = "x-jobaware-nonce"  # the request's header
PROOF = "x-jobaware-proof"  # the answer's header
NO_PROOF = "not the deployment's service (no identity proof)"
_NONCE_FORM = re.compile(r"[0-9a-f]{32,128}")


def new_nonce() -> str:
    """A fresh nonce for one request: 128 random bits, in hex."""
    return secrets.token_hex(16)


def is_nonce(text: str | None) -> bool:
    """Whether `text` is a nonce a service answers (32 to 128 lower-case hex digits; anything else gets no proof)."""
    return text is not None and _NONCE_FORM.fullmatch(text) is not None


def proof(token: bytes, nonce: str, body: bytes) -> str:
    """HMAC-SHA256(token, nonce || SHA-256(body)), in hex."""
    return hmac.new(token, nonce.encode("ascii") + hashlib.sha256(body).digest(), hashlib.sha256).hexdigest()


def proven(token: bytes, nonce: str, body: bytes, given: str | None) -> bool:
    """Whether `given` (the answer's PROOF header) proves `body` for `nonce` (compared in constant time)."""
    return given is not None and hmac.compare_digest(proof(token, nonce, body).encode(), given.encode("ascii", "replace"))
