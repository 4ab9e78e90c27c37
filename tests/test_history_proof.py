"""What proves the history against the real services: the gateway signs each organisation's head at an interval,
and an export with a checkpoint is checked outside Assent with nothing but Python's ``cryptography`` (as the docs
show); a chain rewritten and hashed again, a forged checkpoint and a lost tail are found by verify; the history and
its checkpoints are append-only for the application's role (a superuser's connection and a role granted every
privilege on the schema alike), and the migration revokes UPDATE and DELETE where default privileges granted them;
the retention job prunes under its own role, connected as a login of its own, in batches, each leaving a signed
checkpoint from which the kept chain is verified, so a prefix removed by anyone else is found."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import make_url

from assent.db import create_engine, migrate
from assent.runtime.tables import MIGRATIONS as SHARED_MIGRATIONS
from assent.runtime.tables import VERSION_TABLE
from gateway.adapters.checkpoints import HistoryPruner, RetentionRoleMissing
from gateway.domain.audit import link
from gateway.domain.checkpoints import HistoryKeys
from gateway.entrypoint import MIGRATIONS as GATEWAY_MIGRATIONS
from tests.conftest import Endpoints, Stack, as_admin_of, create_database, new_world, running_stack, wait_for
from tests.test_cli import assent, token_of
from tests.test_history import BROKEN, TURN, WORLD, a_decided_turn, entries_of
from tests.test_memory_edits import memory, open_turn, propose

pytestmark = pytest.mark.integration

RETENTION_ROLE = "assent_history_retention"
N = WORLD + TURN
"""The entries of :func:`a_decided_turn`'s organisation: the direct writes that made its world, then its turn's."""
HEAD = N - 1
"""The position of its last entry, its chain's head."""


@pytest.fixture(scope="module")
async def proof(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """A system whose gateway signs checkpoints every 0.3 s, and runs its retention job every 0.5 s with a
    retention of a century (it prunes nothing here: the tests run the job themselves, with their own cutoff)."""
    env = {
        "ASSENT_HISTORY_CHECKPOINT_SECONDS": "0.3",
        "ASSENT_HISTORY_RETENTION_DAYS": "36500",
        "ASSENT_HISTORY_PRUNE_SECONDS": "0.5",
    }
    async with running_stack(endpoints, tmp_path_factory.mktemp("proof"), env) as running:
        yield running


DOCS = Path(__file__).resolve().parents[1] / "docs" / "explanation" / "history.md"


def outside() -> dict[str, Any]:
    """The functions the docs give a verifier outside Assent (explanation/history.md, "Checkpoints": nothing but the
    standard library and ``cryptography``), read from the page and run as written."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL)
    (code,) = [block for block in blocks if "def check_export" in block]
    functions: dict[str, Any] = {}
    exec(code, functions)
    return functions


# ------------------------------------------------------------------------------------------------------------------


def dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def public_key_of(stack: Stack) -> str:
    """The public half of the stack's signing key: the copy of the key an auditor keeps outside Assent."""
    seed = base64.b64decode(stack.system.env["ASSENT_HISTORY_SIGNING_KEY"])
    key = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    return base64.b64encode(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


async def checkpoint_of(http: httpx.AsyncClient, position: int, kind: str = "head") -> dict[str, Any]:
    """The organisation's newest checkpoint of ``kind``, once it names ``position``."""

    async def probe() -> dict[str, Any] | None:
        page = await http.get("/api/history/checkpoints", params={"kind": kind, "limit": 1})
        assert page.status_code == 200, page.text
        found: list[dict[str, Any]] = page.json()["checkpoints"]
        return found[0] if found and found[0]["position"] == position else None

    return await wait_for(probe)


async def _any_checkpoint(http: httpx.AsyncClient) -> bool:
    page = await http.get("/api/history/checkpoints", params={"kind": "head", "limit": 1})
    assert page.status_code == 200, page.text
    return bool(page.json()["checkpoints"])


async def verify(http: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    answer = await http.get("/api/history/verify", params=params)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def as_superuser(stack: Stack) -> asyncpg.Connection:
    """A connection that tampers as a database superuser can: past the append-only trigger."""
    conn = await asyncpg.connect(dsn(stack.database_url))
    await conn.execute("SET session_replication_role = replica")
    return conn


async def test_an_export_and_a_checkpoint_check_outside_assent_with_cryptography_alone(proof: Stack) -> None:
    async with proof.http() as http:
        world, _, _, _ = await a_decided_turn(http, proof)
        await entries_of(http, N)
        checkpoint = await checkpoint_of(http, HEAD)
        keys = (await http.get("/api/history/keys")).json()
        kept = public_key_of(proof)
        assert keys["signing_key_id"] == checkpoint["key_id"]
        assert keys["keys"] == [
            {"key_id": checkpoint["key_id"], "algorithm": "Ed25519", "public_key": kept, "status": "current"}
        ]
        assert (checkpoint["org_id"], checkpoint["kind"]) == (world.org_id, "head")
        exported = await http.get("/api/history/export", params={"format": "jsonl"})
        lines = exported.text.splitlines()
        assert len(lines) == N
        docs = outside()
        docs["check_checkpoint"](checkpoint, kept)
        docs["check_export"](lines, checkpoint)
        # Changed in one field, the checkpoint no longer checks; an edited export no longer fits.
        for change in ({"position": 5}, {"hash": json.loads(lines[5])["hash"]}, {"kind": "pruned"}, {"at": "x"}):
            with pytest.raises(InvalidSignature):
                docs["check_checkpoint"]({**checkpoint, **change}, kept)
        with pytest.raises(AssertionError, match="signed by another key"):
            docs["check_checkpoint"](checkpoint, base64.b64encode(bytes(32)).decode())
        with pytest.raises(AssertionError, match="the export does not hold the entry the checkpoint signed"):
            docs["check_export"](lines[:HEAD], checkpoint)
        edited = json.dumps({**json.loads(lines[3]), "detail": "nothing to see"})
        with pytest.raises(AssertionError, match="entry 3 was edited"):
            docs["check_export"]([*lines[:3], edited, *lines[4:]], checkpoint)

        verified = await verify(http)
        assert (verified["ok"], verified["signing_key_id"], verified["kept_from"]) == (True, checkpoint["key_id"], 0)
        assert verified["checkpoints_checked"] >= 1
        assert [(c["kind"], c["position"], c["ok"]) for c in verified["checkpoints"]] == [("head", HEAD, True)]

        env = {"ASSENT_URL": proof.gateway_url, "ASSENT_TOKEN": token_of(http), "COLUMNS": "250"}
        listed = await assent("audit", "checkpoints", "--json", "--all", "--limit", "1", env=env)
        assert listed.code == 0 and listed.json()["checkpoints"][0] == checkpoint, listed.err
        shown = await assent("audit", "keys", env=env)
        assert shown.code == 0 and checkpoint["key_id"] in shown.out and kept in shown.out, shown.out
        said = await assent("audit", "verify", env=env)
        assert said.code == 0 and f"head checkpoint of entry {HEAD}" in said.out and "holds" in said.out, said.out

    # Another organisation sees none of these checkpoints.
    async with proof.http() as stranger:
        as_admin_of(stranger, f"org_other_{world.org_id}")
        other = await stranger.get("/api/history/checkpoints")
        assert other.status_code == 200 and other.json() == {"checkpoints": [], "next_cursor": None}


async def test_a_rewritten_chain_a_forged_checkpoint_and_a_lost_tail_are_found(proof: Stack) -> None:
    async with proof.http() as http:
        world, _, _, _ = await a_decided_turn(http, proof)
        env = {"ASSENT_URL": proof.gateway_url, "ASSENT_TOKEN": token_of(http)}
        await entries_of(http, N)
        await checkpoint_of(http, HEAD)
        conn = await as_superuser(proof)
        try:
            # Entry 3 edited, and it and every entry after it hashed again: the chain fits itself, not what was signed.
            rows = await conn.fetch(
                "SELECT * FROM gateway.history WHERE org_id = $1 AND position >= 3 ORDER BY position", world.org_id
            )
            prev = await conn.fetchval(
                "SELECT hash FROM gateway.history WHERE org_id = $1 AND position = 2", world.org_id
            )
            for row in rows:
                fields = {k: v for k, v in dict(row).items() if k not in ("org_id", "position", "prev_hash", "hash")}
                if row["position"] == 3:
                    fields["detail"] = "nothing to see"
                entry = link(world.org_id, row["position"], prev, fields)
                await conn.execute(
                    "UPDATE gateway.history SET detail = $3, prev_hash = $4, hash = $5 WHERE org_id = $1"
                    " AND position = $2",
                    world.org_id,
                    entry.position,
                    entry.detail,
                    entry.prev_hash,
                    entry.hash,
                )
                prev = entry.hash
            await conn.execute("UPDATE gateway.history_heads SET hash = $2 WHERE org_id = $1", world.org_id, prev)
            # The first checkpoint that does not hold: the oldest at or after entry 3 (the signer may have signed a
            # head while the world was made or the turn went on, as well as the last entry).
            signed = (await http.get("/api/history/checkpoints", params={"kind": "head"})).json()["checkpoints"]
            first = min(c["position"] for c in signed if c["position"] >= 3)
            rewritten = await verify(http)
            assert rewritten["ok"] is False and rewritten["checked"] == first
            assert (rewritten["first_break"]["position"], rewritten["first_break"]["reason"]) == (first, "checkpoint")
            assert "rewritten at or before it" in rewritten["first_break"]["detail"]
            assert [(c["position"], c["ok"]) for c in rewritten["checkpoints"]][-1] == (first, False)
            said = await assent("audit", "verify", env={**env, "COLUMNS": "250"})
            assert said.code == BROKEN and f"broken at entry {first} (checkpoint)" in said.out, said.out
        finally:
            await conn.close()

        world, _, _, _ = await a_decided_turn(http, proof)
        await entries_of(http, N)
        signed = await checkpoint_of(http, HEAD)
        conn = await as_superuser(proof)
        try:
            # A checkpoint whose signature is not the key's.
            forged = base64.b64encode(bytes(64)).decode()
            await conn.execute(
                "UPDATE gateway.history_checkpoints SET signature = $2 WHERE org_id = $1 AND kind = 'head' AND position = $3",
                world.org_id,
                forged,
                HEAD,
            )
            refused = await verify(http)
            assert (refused["ok"], refused["first_break"]["reason"]) == (False, "checkpoint")
            assert "signature does not hold" in refused["first_break"]["detail"]
            await conn.execute(
                "UPDATE gateway.history_checkpoints SET signature = $2 WHERE org_id = $1 AND kind = 'head' AND position = $3",
                world.org_id,
                signed["signature"],
                HEAD,
            )
            assert (await verify(http))["ok"] is True

            # The tail removed, and the head moved back: the checkpoint names entries that are gone.
            await conn.execute("DELETE FROM gateway.history WHERE org_id = $1 AND position >= 5", world.org_id)
            await conn.execute(
                "UPDATE gateway.history_heads SET position = 4, hash = (SELECT hash FROM gateway.history"
                " WHERE org_id = $1 AND position = 4) WHERE org_id = $1",
                world.org_id,
            )
            lost = await verify(http)
            assert (lost["ok"], lost["checked"], lost["last"]) == (False, 5, 4)
            assert (lost["first_break"]["position"], lost["first_break"]["reason"]) == (5, "checkpoint")
            assert f"entries 5 to {HEAD} are gone" in lost["first_break"]["detail"]
            # The signer does not sign the shortened chain: once it has signed a pass after the tampering (another
            # organisation's new chain is the marker), this one's newest checkpoint is still of the last entry.
            async with proof.http() as marker:
                await new_world(marker)
                await wait_for(lambda: _any_checkpoint(marker))
            assert (await checkpoint_of(http, HEAD))["hash"] == signed["hash"]
        finally:
            await conn.close()


async def test_the_application_may_not_update_or_delete_the_history_nor_its_checkpoints(proof: Stack) -> None:
    async with proof.http() as http:
        world, _, _, _ = await a_decided_turn(http, proof)
        await entries_of(http, N)
        await checkpoint_of(http, HEAD)
    statements = [
        f"{verb} gateway.{table}{rest}"
        for table in ("history", "history_checkpoints")
        for verb, rest in (
            ("UPDATE", " SET org_id = org_id WHERE org_id = $1"),
            ("DELETE FROM", " WHERE org_id = $1"),
        )
    ]
    # As the application connects here (a superuser): the trigger refuses.
    conn = await asyncpg.connect(dsn(proof.database_url))
    try:
        for statement in statements:
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(statement, world.org_id)
        for table in ("history", "history_checkpoints"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(f"TRUNCATE gateway.{table}")
        assert await conn.fetchval("SELECT count(*) FROM gateway.history WHERE org_id = $1", world.org_id) == N

        # As a deployment's application role, granted every privilege on the schema's rows after the migration
        # (docs/how-to/kubernetes.md): the trigger refuses all the same, and the retention role is not its to take.
        role, password = f"app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        for statement in (
            f"CREATE ROLE {role} LOGIN PASSWORD '{password}'",
            f"GRANT USAGE ON SCHEMA gateway TO {role}",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA gateway TO {role}",
        ):
            await conn.execute(statement)
        app_url = make_url(proof.database_url).set(username=role, password=password)
        try:
            as_app = await asyncpg.connect(dsn(app_url.render_as_string(hide_password=False)))
            try:
                for statement in statements:
                    with pytest.raises(asyncpg.InsufficientPrivilegeError):
                        await as_app.execute(statement, world.org_id)
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await as_app.execute(f"SET ROLE {RETENTION_ROLE}")
            finally:
                await as_app.close()
            engine = create_engine(app_url.render_as_string(hide_password=False), pool_size=1)
            try:
                keys = HistoryKeys(proof.system.env["ASSENT_HISTORY_SIGNING_KEY"])
                with pytest.raises(RetentionRoleMissing, match="ASSENT_HISTORY_RETENTION_DATABASE_URL"):
                    await HistoryPruner(
                        engine, keys, older_than=datetime.now(UTC) - datetime(2000, 1, 1, tzinfo=UTC)
                    ).once()
            finally:
                await engine.dispose()
        finally:
            await conn.execute(f"DROP OWNED BY {role}")
            await conn.execute(f"DROP ROLE {role}")
    finally:
        await conn.close()


async def test_the_retention_job_prunes_under_its_role_and_leaves_a_checkpoint_that_proves_what_it_pruned(
    proof: Stack,
) -> None:
    async with proof.http() as http, proof.coach() as coach:
        world, _, _, _ = await a_decided_turn(http, proof)
        await entries_of(http, N)
        await checkpoint_of(http, HEAD)
        cutoff = datetime.now(UTC)
        await asyncio.sleep(0.05)
        turn = await open_turn(coach, world)
        ada = await memory(http, world.agent_id)
        assert (await propose(turn, world.agent_id, "Newer.\n", ada["version"])).ok
        await entries_of(http, N + 1)
        await checkpoint_of(http, N)

        # The retention job's own login, a member of the retention role (ASSENT_HISTORY_RETENTION_DATABASE_URL).
        conn = await asyncpg.connect(dsn(proof.database_url))
        login, password = f"retention_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        await conn.execute(f"CREATE ROLE {login} LOGIN PASSWORD '{password}' IN ROLE {RETENTION_ROLE}")
        url = make_url(proof.database_url).set(username=login, password=password).render_as_string(hide_password=False)
        engine = create_engine(url, pool_size=1)
        try:
            keys = HistoryKeys(proof.system.env["ASSENT_HISTORY_SIGNING_KEY"])
            pruner = HistoryPruner(engine, keys, older_than=datetime.now(UTC) - cutoff, batch=3)
            assert await pruner.once() >= N  # this organisation's N, and what earlier tests left before the cutoff
        finally:
            await engine.dispose()
            await conn.execute(f"DROP ROLE {login}")
            await conn.close()

        pruned = (await http.get("/api/history/checkpoints", params={"kind": "pruned"})).json()["checkpoints"]
        # A checkpoint per batch of 3 (entries 0 to 2, 3 to 5, ...), of each batch's last entry, newest first.
        assert [c["position"] for c in pruned] == [min(start + 2, HEAD) for start in range(0, N, 3)][::-1]
        heads = (await http.get("/api/history/checkpoints", params={"kind": "head"})).json()["checkpoints"]
        assert [c["position"] for c in heads] == [N]  # those of pruned entries went with them
        page = (await http.get("/api/history", params={"limit": 500})).json()["entries"]
        assert [e["position"] for e in page] == [N]

        verified = await verify(http)
        assert (verified["ok"], verified["kept_from"], verified["first"], verified["last"]) == (True, N, N, N)
        assert [(c["kind"], c["position"], c["ok"]) for c in verified["checkpoints"]] == [
            ("pruned", HEAD, True),
            ("head", N, True),
        ]
        # Outside Assent: the pruned checkpoint is checked as any other, and the kept export goes on from its hash.
        lines = (await http.get("/api/history/export", params={"format": "jsonl"})).text.splitlines()
        docs = outside()
        docs["check_checkpoint"](pruned[0], public_key_of(proof))
        assert json.loads(lines[0])["position"] == pruned[0]["position"] + 1
        docs["check_checkpoint"](heads[0], public_key_of(proof))
        docs["check_export"](lines, heads[0], start=pruned[0]["hash"])
        with pytest.raises(AssertionError, match=f"entry {N} is not linked"):
            docs["check_export"](lines, heads[0])

        # A prefix removed by anyone but the retention job: the kept chain no longer starts where it was pruned.
        conn = await as_superuser(proof)
        try:
            await conn.execute("DELETE FROM gateway.history WHERE org_id = $1 AND position = $2", world.org_id, N)
        finally:
            await conn.close()
        removed = await verify(http)
        assert (removed["ok"], removed["first_break"]["position"], removed["first_break"]["reason"]) == (
            False,
            N,
            "gap",
        )
        # The gateway's own retention job ran all along under the role it takes (its cutoff a century ago).
        log = proof.system.gateway.log_path.read_text()
        assert "could not prune the history" not in log


async def test_the_migration_revokes_update_and_delete_that_default_privileges_grant(endpoints: Endpoints) -> None:
    url = await create_database(endpoints.database_url, f"append_only_{uuid.uuid4().hex[:8]}")
    role = f"app_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(dsn(url))
    try:
        await conn.execute(f"CREATE ROLE {role} NOLOGIN")
        await conn.execute("CREATE SCHEMA gateway")
        await conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA gateway GRANT ALL ON TABLES TO {role}")
        engine = create_engine(url, pool_size=1)
        try:
            await migrate(engine, SHARED_MIGRATIONS, "gateway", version_table=VERSION_TABLE)
            await migrate(engine, GATEWAY_MIGRATIONS, "gateway")
        finally:
            await engine.dispose()

        async def may(who: str, table: str, privilege: str) -> bool:
            return bool(await conn.fetchval("SELECT has_table_privilege($1, $2, $3)", who, table, privilege))

        for table in ("gateway.history", "gateway.history_checkpoints"):
            assert [await may(role, table, p) for p in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")] == [
                True,
                True,
                False,
                False,
                False,
            ], table
            assert await may(RETENTION_ROLE, table, "DELETE") and not await may(RETENTION_ROLE, table, "UPDATE")
        assert await may(role, "gateway.history_heads", "UPDATE")  # the linker moves the heads
        assert await may(RETENTION_ROLE, "gateway.history_checkpoints", "INSERT")
    finally:
        await conn.execute(f"DROP OWNED BY {role}")
        await conn.execute(f"DROP ROLE {role}")
        await conn.close()
