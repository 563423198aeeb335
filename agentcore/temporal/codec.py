"""Optional payload encryption: prompts and answers are not stored in clear in Temporal.

Set ``AGENTCORE_ENCRYPTION_KEY`` (32 random bytes, base64: ``python -c "import os, base64;
print(base64.b64encode(os.urandom(32)).decode())"``) on every client, worker and codec server, and
``connect()`` / ``DevServer`` add ``EncryptionCodec`` to the data converter. Every payload (workflow
input, activity inputs and results, signals, updates, queries, events) is then AES-256-GCM
encrypted before it leaves the process; the server and its database see only ciphertext.

The Temporal Web UI cannot decrypt by itself: ``agentcore codec-server`` (``serve_codec``) answers the
UI's remote-codec calls (``POST /decode``, ``POST /encode``) with the same key, so an operator's browser
shows clear text while the server still stores ciphertext. Needs the ``encryption`` extra
(``pip install 'agentcore[encryption]'``, which brings ``cryptography``).

Each payload is encrypted on its own with a fresh 96-bit nonce; the key's id (a hash prefix, not the
key) is stored beside it, so a worker started with the wrong key fails loudly instead of handing
garbage to the workflow. Payloads without the encrypted encoding pass through untouched: histories
written before encryption was switched on stay readable.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import os
from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, EncodingPayloadConverter, PayloadCodec

from ..errors import EncryptionKeyError

__all__ = [
    "ENCRYPTION_KEY_ENV",
    "EncryptedPayloadConverter",
    "EncryptionCodec",
    "EncryptionKeyError",
    "codec_from_env",
    "key_from_bytes",
    "parse_key",
    "with_codec",
]

ENCRYPTION_KEY_ENV = "AGENTCORE_ENCRYPTION_KEY"
ENCODING = b"binary/encrypted"
_NONCE_BYTES = 12


def parse_key(text: str) -> bytes:
    """A 32-byte key from its base64 form (standard or URL-safe alphabet, padding optional)."""
    cleaned = text.strip()
    try:
        key = base64.urlsafe_b64decode(
            cleaned.replace("+", "-").replace("/", "_") + "=" * (-len(cleaned) % 4)
        )
    except (binascii.Error, ValueError):
        raise EncryptionKeyError(f"{ENCRYPTION_KEY_ENV} is not base64") from None
    if len(key) != 32:
        raise EncryptionKeyError(f"{ENCRYPTION_KEY_ENV} must be 32 bytes (base64), not {len(key)}")
    return key


class EncryptedPayloadConverter(EncodingPayloadConverter):
    """Reads an encrypted payload that reached the payload converter (no codec decrypted it: this
    process has no key) as a clear ``EncryptionKeyError``, not the SDK's "Unknown payload encoding".
    It never encodes anything. A worker started without the key beside workers with it fails the
    workflow tasks it takes with this message (the server gives each such task to a worker again)."""

    @property
    def encoding(self) -> str:
        return ENCODING.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        key_id = payload.metadata.get("encryption-key-id", b"").decode(errors="replace")
        raise EncryptionKeyError(
            f"payload encrypted with key {key_id!r} and this process has no key: set "
            f"{ENCRYPTION_KEY_ENV} as on the processes that wrote it (every client and worker of a "
            "task queue needs the same key)"
        )


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over each serialized payload."""

    def __init__(self, key: bytes) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:
            raise ImportError(
                "payload encryption needs the `cryptography` package: pip install 'agentcore[encryption]'"
            ) from None
        if len(key) != 32:
            raise EncryptionKeyError("the encryption key must be 32 bytes")
        self._aead = AESGCM(key)
        # Identifies the key without revealing it, so a key mismatch is reported as such.
        self.key_id = hashlib.sha256(b"agentcore-key-id" + key).hexdigest()[:16].encode()

    def encode_sync(self, payloads: Sequence[Payload]) -> list[Payload]:
        encoded = []
        for payload in payloads:
            nonce = os.urandom(_NONCE_BYTES)
            sealed = self._aead.encrypt(nonce, payload.SerializeToString(), None)
            encoded.append(
                Payload(
                    metadata={"encoding": ENCODING, "encryption-key-id": self.key_id}, data=nonce + sealed
                )
            )
        return encoded

    def decode_sync(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                decoded.append(payload)
                continue
            key_id = payload.metadata.get("encryption-key-id", b"")
            if key_id != self.key_id:
                raise EncryptionKeyError(
                    f"payload encrypted with key {key_id.decode(errors='replace')!r}, "
                    f"this process has {self.key_id.decode()!r}: check {ENCRYPTION_KEY_ENV}"
                )
            nonce, sealed = payload.data[:_NONCE_BYTES], payload.data[_NONCE_BYTES:]
            decoded.append(Payload.FromString(self._aead.decrypt(nonce, sealed, None)))
        return decoded

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.encode_sync(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.decode_sync(payloads)


def codec_from_env(environ: dict[str, str] | None = None) -> EncryptionCodec | None:
    """The codec for ``AGENTCORE_ENCRYPTION_KEY``, or None when it is unset or empty."""
    text = (environ if environ is not None else os.environ).get(ENCRYPTION_KEY_ENV, "")
    return EncryptionCodec(parse_key(text)) if text.strip() else None


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    """``converter`` with ``codec`` as its payload codec (unchanged when ``codec`` is None)."""
    return converter if codec is None else dataclasses.replace(converter, payload_codec=codec)


def key_from_bytes(key: bytes) -> str:
    """The ``AGENTCORE_ENCRYPTION_KEY`` value for a raw 32-byte key."""
    return base64.b64encode(key).decode()
