"""The history's signed checkpoints, in memory: the canonical encoding a signature covers, the key settings (a
base64 seed or a PEM key; retired public keys), the key id, and a check that names why a checkpoint does not hold."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import SecretStr

from gateway.domain.checkpoints import Checkpoint, HistoryKeys, SigningKeyError, signed_bytes

AT = datetime(2026, 12, 8, 8, 0, 0, 5, tzinfo=UTC)


def seed() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def public_of(seed_b64: str) -> str:
    key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(seed_b64)).public_key()
    return base64.b64encode(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


def test_a_checkpoint_is_signed_over_sorted_json_of_its_fields_and_checks_with_cryptography_alone() -> None:
    keys = HistoryKeys(SecretStr(seed()))
    checkpoint = keys.sign("org_a", 41, "ab" * 32, AT, "head")
    assert keys.check(checkpoint) is None
    # As a verifier outside Assent does it, from the checkpoint's JSON and the published key.
    read = json.loads(checkpoint.model_dump_json())
    assert read["at"] == "2026-12-08T08:00:00.000005Z"
    message = json.dumps(
        {k: read[k] for k in ("org_id", "position", "hash", "at", "key_id", "kind")},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    assert message == signed_bytes(checkpoint.model_dump())
    (published,) = keys.public_keys()
    assert (published.key_id, published.status) == (read["key_id"], "current")
    raw = base64.b64decode(published.public_key)
    assert hashlib.sha256(raw).hexdigest()[:16] == read["key_id"]
    Ed25519PublicKey.from_public_bytes(raw).verify(base64.b64decode(read["signature"]), message)  # raises if not


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"hash": "cd" * 32}, "signature does not hold"),
        ({"position": 42}, "signature does not hold"),
        ({"kind": "pruned"}, "signature does not hold"),
        ({"org_id": "org_b"}, "signature does not hold"),
        ({"signature": base64.b64encode(b"x" * 64).decode()}, "signature does not hold"),
        ({"signature": "not base64!"}, "signature does not hold"),
        ({"key_id": "0123456789abcdef"}, "neither ASSENT_HISTORY_SIGNING_KEY nor one of"),
    ],
    ids=["hash", "position", "kind", "organisation", "another signature", "garbage", "an unknown key"],
)
def test_a_changed_checkpoint_does_not_hold(change: dict[str, object], said: str) -> None:
    keys = HistoryKeys(seed())
    checkpoint = keys.sign("org_a", 41, "ab" * 32, AT, "head")
    why = keys.check(checkpoint.model_copy(update=change))
    assert why is not None and said in why


def test_a_retired_key_still_verifies_what_it_signed_and_signs_nothing() -> None:
    old, new = seed(), seed()
    before = HistoryKeys(old).sign("org_a", 3, "ab" * 32, AT, "pruned")
    after = HistoryKeys(new, retired=f" {public_of(old)} ,")
    assert after.check(before) is None and after.sign("org_a", 4, "cd" * 32, AT, "head").key_id != before.key_id
    assert [(k.status, k.key_id) for k in after.public_keys()] == [
        ("current", after.signing_key_id),
        ("retired", before.key_id),
    ]
    # Without it, the old checkpoint's key is unknown.
    assert "neither" in (HistoryKeys(new).check(before) or "")


def test_the_signing_key_may_be_a_pem_private_key_and_the_same_seed_gives_the_same_id() -> None:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    as_pem, as_seed = HistoryKeys(pem), HistoryKeys(base64.urlsafe_b64encode(raw).decode().rstrip("="))
    assert as_pem.signing_key_id == as_seed.signing_key_id is not None
    assert as_seed.check(as_pem.sign("o", 0, "0" * 64, AT, "head")) is None


def test_without_a_key_nothing_is_signed() -> None:
    keys = HistoryKeys(None, "")
    assert (keys.can_sign, keys.signing_key_id, keys.public_keys()) == (False, None, [])
    with pytest.raises(SigningKeyError, match="ASSENT_HISTORY_SIGNING_KEY is not set"):
        keys.sign("o", 0, "0" * 64, AT, "head")
    assert HistoryKeys("  ").can_sign is False


@pytest.mark.parametrize(
    ("signing", "retired", "said"),
    [
        ("not a key at all!", "", "ASSENT_HISTORY_SIGNING_KEY is neither base64 nor a PEM"),
        (base64.b64encode(b"short").decode(), "", "must hold 32 bytes"),
        ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", "", "not an unencrypted private key"),
        (None, "not base64!", "ASSENT_HISTORY_RETIRED_KEYS: the key is not base64"),
        (None, f"{base64.b64encode(b'x' * 32).decode()},{base64.b64encode(b'y').decode()}", "key 2 of 2 is not 32"),
    ],
)
def test_a_key_setting_that_cannot_be_read_is_refused_without_its_value(
    signing: str | None, retired: str, said: str
) -> None:
    with pytest.raises(SigningKeyError, match=said) as refused:
        HistoryKeys(signing, retired)
    if signing:
        assert signing not in str(refused.value)


def test_a_checkpoint_read_back_from_its_json_is_the_same() -> None:
    keys = HistoryKeys(seed())
    checkpoint = keys.sign("org_a", 7, "ab" * 32, AT, "head")
    assert Checkpoint.model_validate_json(checkpoint.model_dump_json()) == checkpoint


async def test_the_gateway_signs_where_a_key_is_set_and_prunes_where_a_retention_is_set_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from gateway.adapters.checkpoints import CheckpointSigner, HistoryPruner
    from gateway.entrypoint import history_jobs
    from gateway.handlers import Deps
    from gateway.settings import GatewaySettings

    def jobs(**settings: object) -> tuple[list[object], list[object]]:
        gateway = GatewaySettings.model_validate(settings)
        engines: list[object] = []
        deps = Deps(runtime=None, settings=gateway, events=None)  # type: ignore[arg-type]
        return list(history_jobs(gateway, deps, engine=None, engines=engines)), engines  # type: ignore[arg-type]

    assert jobs() == ([], [])
    with caplog.at_level("WARNING"):
        assert jobs(history_retention_days=30) == ([], [])
    assert "the history is not pruned" in caplog.text
    signer_only, _ = jobs(history_signing_key=seed(), history_checkpoint_seconds=5)
    assert [type(j) for j in signer_only] == [CheckpointSigner] and signer_only[0].every == 5  # type: ignore[attr-defined]
    both, engines = jobs(
        history_signing_key=seed(),
        history_retention_days=30,
        history_prune_batch=50,
        history_retention_database_url="postgresql+asyncpg://retention:secret@127.0.0.1:1/assent",
    )
    assert [type(j) for j in both] == [CheckpointSigner, HistoryPruner]
    pruner = both[1]
    assert isinstance(pruner, HistoryPruner) and (pruner.batch, pruner.older_than.days) == (50, 30)
    assert len(engines) == 1 and pruner.engine is engines[0]  # its own login's engine, disposed of with the app
    await engines[0].dispose()  # type: ignore[attr-defined]
    with pytest.raises(SigningKeyError):
        jobs(history_signing_key="not a key at all!")
