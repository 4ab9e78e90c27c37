"""Logins' credentials at rest: encrypted with ``cryptography``'s ``MultiFernet`` under keys from the environment.

``ASSENT_CREDENTIALS_KEY`` holds one Fernet key (``Fernet.generate_key()``: 32 bytes, URL-safe base64) or a
comma-separated list: the first encrypts, every one decrypts. To rotate, roll out ``new,old`` to every replica: each
re-encrypts the stored credentials under the new key as it starts (:meth:`CredentialBox.rotate`, for rows whose
``key_id`` is not the first key's); then roll out ``new`` alone. Neither a key nor a credential is ever put in a
message raised here or in a log line.
"""

from __future__ import annotations

import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import SecretStr, TypeAdapter

from ..domain.logins import Credentials

ENV = "ASSENT_CREDENTIALS_KEY"
CREDENTIALS: TypeAdapter[Credentials] = TypeAdapter(Credentials)
"""Credentials as the JSON object that is encrypted: ``{"token": ..., "headers": {...}}``."""


class CredentialKeyError(ValueError):
    """The credentials key is missing or not a Fernet key. The message names the variable, never its value."""


class UnreadableCredentials(Exception):
    """Stored credentials that none of the keys decrypts (a key dropped too soon)."""


def key_id(key: bytes) -> str:
    """A fingerprint of ``key`` that tells which key encrypted a row, and nothing of the key."""
    return "k" + hashlib.sha256(b"assent-credentials-key:" + key).hexdigest()[:16]


class CredentialBox:
    """Encrypts and decrypts credentials (as JSON objects) with the configured keys."""

    def __init__(self, setting: SecretStr | str | None) -> None:
        raw = setting.get_secret_value() if isinstance(setting, SecretStr) else setting or ""
        keys = [part.strip().encode() for part in raw.split(",") if part.strip()]
        if not keys:
            raise CredentialKeyError(
                f"{ENV} is not set: give a Fernet key (python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'), or a comma-separated list whose first key encrypts"
            )
        try:
            fernets = [Fernet(key) for key in keys]
        except ValueError:
            raise CredentialKeyError(
                f"{ENV} holds a value that is not a Fernet key (32 bytes, URL-safe base64)"
            ) from None
        self._fernet = MultiFernet(fernets)
        self.key_id = key_id(keys[0])
        """The fingerprint of the key that encrypts."""

    def encrypt(self, credentials: Credentials) -> str:
        return self._fernet.encrypt(json.dumps(CREDENTIALS.dump_python(credentials, mode="json")).encode()).decode()

    def decrypt(self, token: str) -> Credentials:
        try:
            plain = self._fernet.decrypt(token.encode())
        except InvalidToken:
            raise UnreadableCredentials("no configured key decrypts the stored credentials") from None
        return CREDENTIALS.validate_json(plain)

    def rotate(self, token: str) -> str:
        """``token`` encrypted again under the first key."""
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken:
            raise UnreadableCredentials("no configured key decrypts the stored credentials") from None
