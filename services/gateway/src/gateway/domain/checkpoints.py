"""Signed checkpoints of the history: what lets an export be checked outside Assent.

A checkpoint says, under the deployment's Ed25519 key, that an organisation's entry at ``position`` had ``hash`` at
time ``at``. ``kind`` is ``head`` (the head of the chain when it was signed) or ``pruned`` (the last entry the
retention job removed: the kept chain goes on from it). The signature is over the checkpoint's canonical encoding
(:func:`signed_bytes`): a JSON object of ``at``, ``hash``, ``key_id``, ``kind``, ``org_id`` and ``position``, keys
sorted, no whitespace, UTF-8, ``at`` in UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (as an entry's). The docs
(explanation/history.md) specify it for a verifier outside Assent.

The key: ``ASSENT_HISTORY_SIGNING_KEY`` holds the 32-byte Ed25519 private key (its seed) in base64, or a PEM
(PKCS #8) private key; ``ASSENT_HISTORY_RETIRED_KEYS`` holds earlier public keys (each the 32 raw bytes in base64,
comma-separated), which verify the checkpoints they signed and sign nothing. A key's id is the first 16 hex digits
of the SHA-256 of its 32 raw public bytes (:func:`key_id`). Neither a private key nor a setting's value is ever put
in a message raised here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, SecretStr, field_serializer

from .audit import timestamp

SIGNING_ENV = "ASSENT_HISTORY_SIGNING_KEY"
RETIRED_ENV = "ASSENT_HISTORY_RETIRED_KEYS"
SIGNED_FIELDS = ("at", "hash", "key_id", "kind", "org_id", "position")
"""The fields a checkpoint's signature covers (all but ``signature``)."""

CheckpointKind = Literal["head", "pruned"]


class Checkpoint(BaseModel):
    """A signed checkpoint of an organisation's history: the entry at ``position`` had ``hash`` at ``at``.
    ``kind``: ``head`` (the chain's head when signed) or ``pruned`` (the last entry the retention job removed; the
    kept chain goes on from it). ``key_id`` names the key (``GET /api/history/keys``), ``signature`` is the
    Ed25519 signature (base64) over the canonical encoding of the other fields."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    position: int
    hash: str
    at: datetime
    key_id: str
    kind: CheckpointKind
    signature: str

    @field_serializer("at", when_used="json")
    def _canonical_time(self, at: datetime) -> str:
        # In JSON as the signed encoding writes it: a checkpoint read from the API is checked as read.
        return timestamp(at)


def signed_bytes(fields: dict[str, object]) -> bytes:
    """The canonical encoding a checkpoint's signature covers, of a mapping that holds each of
    :data:`SIGNED_FIELDS` (``signature``, if there, is not read)."""
    values = {name: fields[name] for name in SIGNED_FIELDS}
    at = values["at"]
    if isinstance(at, datetime):
        values["at"] = timestamp(at)
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """A public key's id: the first 16 hex digits of the SHA-256 of its 32 raw bytes."""
    return hashlib.sha256(raw_public(key)).hexdigest()[:16]


class SigningKeyError(ValueError):
    """A key setting that cannot be read. The message names the variable, never its value."""


@dataclass(frozen=True)
class PublicKey:
    """A key that verifies checkpoints: its id, the 32 raw bytes in base64, and whether it signs now."""

    key_id: str
    public_key: str
    status: Literal["current", "retired"]


def _b64(text: str) -> bytes:
    text = text.strip()
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not base64") from None


def load_signing_key(setting: SecretStr | str) -> Ed25519PrivateKey:
    """The private key of ``ASSENT_HISTORY_SIGNING_KEY``: 32 bytes (the seed) in base64, or a PEM private key."""
    text = setting.get_secret_value() if isinstance(setting, SecretStr) else setting
    text = text.strip()
    if text.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError):
            raise SigningKeyError(f"{SIGNING_ENV} holds a PEM block that is not an unencrypted private key") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(f"{SIGNING_ENV} holds a PEM private key that is not an Ed25519 key")
        return key
    try:
        seed = _b64(text)
    except ValueError:
        raise SigningKeyError(
            f"{SIGNING_ENV} is neither base64 nor a PEM private key (make one: python3 -c 'import base64, os; "
            "print(base64.b64encode(os.urandom(32)).decode())')"
        ) from None
    if len(seed) != 32:
        raise SigningKeyError(f"{SIGNING_ENV} must hold 32 bytes in base64 (an Ed25519 seed), not {len(seed)}")
    return Ed25519PrivateKey.from_private_bytes(seed)


def load_public_keys(setting: str) -> list[Ed25519PublicKey]:
    """The public keys of ``ASSENT_HISTORY_RETIRED_KEYS``: comma-separated, each 32 raw bytes in base64."""
    keys = []
    parts = [part.strip() for part in setting.split(",") if part.strip()]
    for n, part in enumerate(parts, start=1):
        which = f"key {n} of {len(parts)}" if len(parts) > 1 else "the key"
        try:
            raw = _b64(part)
        except ValueError:
            raise SigningKeyError(f"{RETIRED_ENV}: {which} is not base64") from None
        if len(raw) != 32:
            raise SigningKeyError(f"{RETIRED_ENV}: {which} is not 32 bytes (an Ed25519 public key, raw, in base64)")
        keys.append(Ed25519PublicKey.from_public_bytes(raw))
    return keys


class HistoryKeys:
    """The key that signs checkpoints (None: none is configured, no checkpoint is made) and every key that
    verifies them: the signing key's public half and the retired keys."""

    def __init__(self, signing: SecretStr | str | None = None, retired: str | None = None) -> None:
        text = signing.get_secret_value() if isinstance(signing, SecretStr) else signing
        self._signing = load_signing_key(text) if text and text.strip() else None
        self.signing_key_id = None if self._signing is None else key_id(self._signing.public_key())
        """The id of the key that signs now (None: none does)."""
        self._verifying: dict[str, tuple[Ed25519PublicKey, Literal["current", "retired"]]] = {}
        if self._signing is not None:
            self._verifying[key_id(self._signing.public_key())] = (self._signing.public_key(), "current")
        for key in load_public_keys(retired or ""):
            self._verifying.setdefault(key_id(key), (key, "retired"))

    @property
    def can_sign(self) -> bool:
        return self._signing is not None

    def public_keys(self) -> list[PublicKey]:
        """Every key that verifies, the signing one first."""
        return [
            PublicKey(key_id=kid, public_key=base64.b64encode(raw_public(key)).decode(), status=status)
            for kid, (key, status) in self._verifying.items()
        ]

    def sign(self, org_id: str, position: int, hash_: str, at: datetime, kind: CheckpointKind) -> Checkpoint:
        """A checkpoint of ``org_id``'s entry at ``position``, signed with the signing key."""
        if self._signing is None or self.signing_key_id is None:
            raise SigningKeyError(f"{SIGNING_ENV} is not set: no checkpoint can be signed")
        fields: dict[str, object] = {
            "org_id": org_id,
            "position": position,
            "hash": hash_,
            "at": at,
            "key_id": self.signing_key_id,
            "kind": kind,
        }
        signature = base64.b64encode(self._signing.sign(signed_bytes(fields))).decode()
        return Checkpoint.model_validate({**fields, "signature": signature})

    def check(self, checkpoint: Checkpoint) -> str | None:
        """Why ``checkpoint``'s signature does not hold (None: it holds under a key this gateway knows)."""
        known = self._verifying.get(checkpoint.key_id)
        if known is None:
            return f"it is signed by key {checkpoint.key_id}, which is neither {SIGNING_ENV} nor one of {RETIRED_ENV}"
        try:
            known[0].verify(base64.b64decode(checkpoint.signature), signed_bytes(checkpoint.model_dump()))
        except (InvalidSignature, binascii.Error, ValueError):
            return f"its signature does not hold under key {checkpoint.key_id}"
        return None
