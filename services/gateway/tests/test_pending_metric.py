"""The ``org`` label of the pending-decisions gauge: a hash of the organisation's id, never the id itself."""

from __future__ import annotations

import hashlib

import pytest

from gateway.adapters.metrics import org_label


@pytest.mark.parametrize(
    ("org_id", "label"),
    [
        ("acme", hashlib.sha256(b"acme").hexdigest()[:16]),
        ("org_1f2e3d4c", hashlib.sha256(b"org_1f2e3d4c").hexdigest()[:16]),
        ("Société Générale", hashlib.sha256("Société Générale".encode()).hexdigest()[:16]),
    ],
)
def test_the_label_is_the_first_16_hex_digits_of_the_ids_sha256(org_id: str, label: str) -> None:
    assert org_label(org_id) == label


def test_different_organisations_get_different_labels_and_one_keeps_its_own() -> None:
    assert org_label("acme") != org_label("acme ") != org_label("Acme")
    assert org_label("acme") == org_label("acme")
