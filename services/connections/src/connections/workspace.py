"""The connections service's use cases behind its routes: logins (create, change, delete, read) and a session's
connections (list, grant, revoke); and what it does as it starts (the platform's logins, credentials encrypted again
under a new key).

Each takes the unit of work of its request (:mod:`connections.api`). Organisations are walls: with ``org`` (the
person's organisation) another organisation's login or session is :class:`NotFound`, in the words a missing one gets.
A change of what a login's catalog says (created, deleted, its name, tools or verified flag) emits the catalog on
``connections.catalogs`` in the same transaction. Each person's write (a login created, changed or deleted, a grant
given or taken back) is recorded for the organisation's history in its transaction
(:func:`assent.runtime.writes.record_write`), with the login's card hash (what a login request binds) before and
after.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from assent.contracts import DecisionMade, ProposalOutcome
from assent.domain import Refusal, Session
from assent.runtime.uow import UnitOfWork
from assent.runtime.walls import NotFound, agent_in, guild_in, org_in
from assent.runtime.writes import record_write
from connections_contract import routes as api
from connections_contract.routes import (
    CredentialsIn,
    LoginIn,
    LoginPatch,
    PlatformLoginIn,
    ScopedLoginIn,
    ToolIn,
    lifetime_of,
)
from connections_contract.topics import CONNECTIONS_CATALOGS

from .adapters.crypto import CredentialBox, UnreadableCredentials
from .adapters.repository import LoginsRepository
from .domain.grants import Grant, expiry
from .domain.logins import Credentials, Login, catalog, tool_views
from .domain.policy import ToolSpec
from .kinds.login import ConnectionsKit, not_connected, reachable_login

log = logging.getLogger(__name__)

CATALOG_FIELDS = frozenset({"name", "tools", "verified", "server_url"})
"""The fields whose change changes a login's catalog."""
EDITED_FIELDS = frozenset({"name", "server_url", "account", "connected", "verified"})
"""The fields of a login that a change sets as they are given (its tools and credentials are made from theirs)."""
PLATFORM_FIELDS = ("name", "server_url", "account", "connected", "verified", "tools")
"""The fields of a platform login that the deployment lists."""


class Problem(Exception):
    """A refusal with its HTTP status (403, 409, 422) and why."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def store(uow: UnitOfWork) -> LoginsRepository:
    return uow.store(LoginsRepository)


def tool_specs(tools: dict[str, ToolIn]) -> tuple[ToolSpec, ...]:
    return tuple(
        ToolSpec(name, tool.description, tool.read_only_hint, tool.default_off, tool.mutating)
        for name, tool in tools.items()
    )


def sealed(box: CredentialBox, credentials: CredentialsIn | None) -> str | None:
    """The credentials encrypted for storage (None: none)."""
    if credentials is None:
        return None
    return box.encrypt(Credentials(credentials.token, dict(credentials.headers)))


def login_view(login: Login) -> api.Login:
    return api.Login(
        login_id=login.login_id,
        org_id=login.org_id,
        scope=login.scope,
        scope_id=login.scope_id,
        name=login.name,
        server_url=login.server_url,
        account=login.account,
        connected=login.connected,
        verified=login.verified,
        has_credentials=login.has_credentials,
        tools=tool_views(login),
        revision=login.revision,
        updated_by=login.updated_by,
        updated_at=login.updated_at,
    )


async def publish_catalog(uow: UnitOfWork, login: Login, *, deleted: bool = False) -> None:
    await uow.emit(CONNECTIONS_CATALOGS, login.login_id, catalog(login, deleted=deleted))


async def _record(
    uow: UnitOfWork,
    route: str,
    login: Login,
    action: str,
    actor: str,
    *,
    target: str | None = None,
    hash_before: str | None = None,
    hash_after: str | None = None,
    detail: str | None = None,
) -> None:
    assert login.org_id is not None  # a platform login is the deployment's: no route writes it
    await record_write(
        uow,
        route,
        org_id=login.org_id,
        guild_id=login.scope_id if login.scope == "guild" else None,
        agent_id=login.scope_id if login.scope == "agent" else None,
        kind="login",
        action=action,
        target=target or f"Login {login.name}",
        actor=actor,
        hash_before=hash_before,
        hash_after=hash_after,
        detail=detail,
    )


# --- logins ---------------------------------------------------------------------------------------------------


async def login_in(uow: UnitOfWork, login_id: str, org: str | None, *, for_update: bool = False) -> Login:
    """The login, as the caller's organisation sees it (the platform's too)."""
    login = await store(uow).get(login_id, for_update=for_update)
    if login is None or (org is not None and login.org_id not in (org, None)):
        raise NotFound(f"login {login_id!r} does not exist")
    return login


async def logins_of(uow: UnitOfWork, org_id: str, org: str | None) -> list[Login]:
    """The organisation's logins and the platform's."""
    return await store(uow).of_org(await org_in(uow, org_id, org))


def not_the_platforms(login: Login) -> None:
    if login.scope == "platform":
        raise Problem(
            403, f"login {login.login_id!r} is the platform's: the deployment sets it (ASSENT_PLATFORM_LOGINS)"
        )


async def create_login(uow: UnitOfWork, body: LoginIn, org: str, actor: str, box: CredentialBox) -> Login:
    scope_id = body.scope_id if isinstance(body, ScopedLoginIn) else None
    if body.scope == "guild":
        await guild_in(uow, scope_id or "", org)
    elif body.scope == "agent":
        await agent_in(uow, scope_id or "", org)
    login = Login(
        login_id=body.login_id,
        org_id=org,
        scope=body.scope,
        scope_id=scope_id,
        name=body.name,
        server_url=body.server_url,
        account=body.account,
        connected=body.connected,
        verified=body.verified,
        tools=tool_specs(body.tools),
        updated_by=actor,
    )
    if not await store(uow).create(login, sealed(box, body.credentials), box.key_id):
        raise Problem(409, f"login {body.login_id!r} exists")
    created = await store(uow).get(login.login_id)
    assert created is not None  # created in this transaction
    await publish_catalog(uow, created)
    await _record(uow, "create_login", created, "create", actor, hash_after=created.card_hash)
    return created


async def update_login(
    uow: UnitOfWork, login_id: str, body: LoginPatch, org: str | None, actor: str, box: CredentialBox
) -> Login:
    login = await login_in(uow, login_id, org, for_update=True)
    not_the_platforms(login)
    given = body.model_fields_set
    if not given:
        return login
    edited = dataclasses.replace(login, **body.model_dump(include=given & EDITED_FIELDS))
    if "tools" in given:
        edited = dataclasses.replace(edited, tools=tool_specs(body.tools or {}))
    if "credentials" in given:
        token = sealed(box, body.credentials)
        await store(uow).set_credentials(login_id, token, box.key_id if token is not None else None)
    changed = await store(uow).change(edited, actor)
    if given & CATALOG_FIELDS:
        await publish_catalog(uow, changed)
    await _record(
        uow,
        "update_login",
        changed,
        "edit",
        actor,
        hash_before=login.card_hash,
        hash_after=changed.card_hash,
        detail=", ".join(sorted(given)),
    )
    return changed


async def delete_login(uow: UnitOfWork, login_id: str, org: str | None, actor: str) -> api.LoginDeleted:
    login = await login_in(uow, login_id, org, for_update=True)
    not_the_platforms(login)
    await store(uow).delete(login_id)
    await publish_catalog(uow, dataclasses.replace(login, revision=login.revision + 1), deleted=True)
    await _record(uow, "delete_login", login, "delete", actor, hash_before=login.card_hash)
    return api.LoginDeleted(login_id=login_id, deleted=True)


# --- sessions ---------------------------------------------------------------------------------------------------


async def session_in(uow: UnitOfWork, session_id: str, org: str | None) -> Session:
    session = await uow.sessions.get(session_id)
    if session is None or (org is not None and session.org_id != org):
        raise NotFound(f"session {session_id!r} does not exist")
    return session


def session_view(session: Session, grants: dict[str, Grant], now: datetime) -> api.StudioSession:
    held = [] if session.closed else sorted(login_id for login_id, grant in grants.items() if grant.held(now))
    return api.StudioSession(
        session_id=session.session_id,
        org_id=session.org_id,
        source_guild_id=session.source_guild_id,
        operator_user_id=session.operator_user_id,
        closed=session.closed,
        granted_connection_ids=held,
    )


async def session_connections(
    uow: UnitOfWork, session_id: str, org: str | None, now: datetime | None = None
) -> api.SessionConnections:
    """Every login reachable from the session's source guild, with whether the session holds it at ``now`` (the
    service's clock) and until when."""
    now = now or datetime.now(UTC)
    session = await session_in(uow, session_id, org)
    members = [a.agent_id for a in await uow.workspace.agents_of_guild(session.source_guild_id) if a.live]
    logins = await store(uow).reachable(session.org_id, session.source_guild_id, members)
    grants = await store(uow).grants_of(session_id)
    connections = []
    for login in logins:
        grant = grants.get(login.login_id)
        connections.append(
            api.SessionConnection(
                connection_id=login.login_id,
                name=login.name,
                scope=login.scope,
                scope_id=login.scope_id,
                server_url=login.server_url,
                account=login.account,
                connected=login.connected,
                verified=login.verified,
                tools=tool_views(login),
                granted=grant is not None and grant.held(now) and not session.closed,
                granted_by=None if grant is None else grant.granted_by,
                granted_at=None if grant is None else grant.granted_at,
                revoked_by=None if grant is None else grant.revoked_by,
                revoked_at=None if grant is None else grant.revoked_at,
                expires_at=None if grant is None else grant.expires_at,
            )
        )
    return api.SessionConnections(session_id=session_id, closed=session.closed, connections=connections)


def refused(refusal: Refusal) -> Exception:
    """A refusal of the login kind's rules as the route answers it: a login out of the session's reach is one it
    does not know (404)."""
    if refusal.status in (404, 422) and refusal.code in ("unknown_connection", "connection_out_of_reach"):
        return NotFound(refusal.message)
    return Problem(refusal.status, refusal.message)


async def decide(
    kit: ConnectionsKit,
    uow: UnitOfWork,
    session_id: str,
    proposal_id: str,
    seq: int,
    decision: str,
    actor: str,
    via: str,
    options: dict[str, Any] | None = None,
) -> ProposalOutcome:
    """Decide one login request through the kit, as a decision from the gateway is (a popover grant answers each
    waiting request of the login so): resolved once, its outcome on ``proposals.outcomes`` (the turn barrier counts
    it, and the gateway's projection resolves the request)."""
    outcome = await kit.on_decision(
        DecisionMade(
            decision_id=f"dec_{uuid.uuid4().hex}",
            proposal_id=proposal_id,
            session_id=session_id,
            seq=seq,
            kind="login",
            decision=decision,
            actor=actor,
            via=via,
            options=options or {},
        ),
        uow,
    )
    assert outcome is not None  # the login kind is this kit's
    return outcome


async def set_grant(
    uow: UnitOfWork,
    kit: ConnectionsKit,
    session_id: str,
    connection_id: str,
    granted: bool,
    org: str | None,
    actor: str,
    lifetime: str | None = None,
) -> api.StudioSession:
    """Grant or revoke a login for the session (the Logins popover); a grant for ``lifetime`` (an ISO 8601 duration)
    lapses after it (None: it lasts until the session closes). A grant also answers each waiting request of the login
    as granted."""
    if lifetime is not None and not granted:
        raise Problem(422, "lifetime goes with a grant only, not a revoke")
    length = None if lifetime is None else lifetime_of(lifetime)
    await uow.lock_session(session_id)
    session = await session_in(uow, session_id, org)
    if session.closed:
        raise Problem(409, f"session {session_id!r} is closed; its grants ended")
    found = await reachable_login(session, connection_id, uow)
    if isinstance(found, Refusal):
        raise refused(found)
    login = found
    now = kit.login.now()
    if granted:
        if not login.connected:
            raise Problem(409, not_connected(login).message)
        await store(uow).grant(session_id, login.login_id, actor, "popover", None, now, expiry(now, length))
        options = {} if lifetime is None else {"lifetime": lifetime}
        for proposal_id in await store(uow).pending_proposals(session_id, login.login_id):
            request = await uow.proposals.get(proposal_id)
            assert request is not None
            await decide(kit, uow, session_id, proposal_id, request.seq, "grant", actor, "popover", options)
    else:
        await store(uow).revoke(session_id, login.login_id, actor, now)
    await record_write(
        uow,
        "set_connection_grant",
        org_id=session.org_id,
        guild_id=session.source_guild_id,
        agent_id=login.scope_id if login.scope == "agent" else None,
        kind="login",
        action="grant" if granted else "revoke",
        target=login.label,
        actor=actor,
        hash_before=login.card_hash,
        hash_after=login.card_hash,
        detail=f"session {session_id}",
    )
    return session_view(session, await store(uow).grants_of(session_id), now)


# --- start-up ---------------------------------------------------------------------------------------------------


async def keep_platform_logins(uow: UnitOfWork, listed: list[PlatformLoginIn], box: CredentialBox) -> None:
    """The platform's logins as the deployment lists them: each listed one created or brought up to date (its
    credentials encrypted again), each no longer listed deleted; their catalogs emitted where they changed."""
    repo = store(uow)
    for entry in listed:
        held = await repo.get(entry.login_id, for_update=True)
        if held is not None and held.scope != "platform":
            raise RuntimeError(
                f"ASSENT_PLATFORM_LOGINS lists {entry.login_id!r}, which is an organisation's login; choose another id"
            )
        listed_login = Login(
            login_id=entry.login_id,
            org_id=None,
            scope="platform",
            scope_id=None,
            name=entry.name,
            server_url=entry.server_url,
            account=entry.account,
            connected=entry.connected,
            verified=entry.verified,
            tools=tool_specs(entry.tools),
            updated_by="deployment",
        )
        wanted = {name: getattr(listed_login, name) for name in PLATFORM_FIELDS}
        if held is None:
            await repo.create(listed_login, sealed(box, entry.credentials), box.key_id)
            created = await repo.get(entry.login_id)
            assert created is not None
            await publish_catalog(uow, created)
            continue
        changed = {name: value for name, value in wanted.items() if getattr(held, name) != value}
        token = sealed(box, entry.credentials)
        await repo.set_credentials(entry.login_id, token, box.key_id if token is not None else None)
        if changed:
            login = await repo.change(dataclasses.replace(held, **changed), "deployment")
            if changed.keys() & CATALOG_FIELDS:
                await publish_catalog(uow, login)
    for login_id in set(await repo.platform_ids()) - {entry.login_id for entry in listed}:
        gone = await repo.get(login_id)
        assert gone is not None
        await repo.delete(login_id)
        await publish_catalog(uow, dataclasses.replace(gone, revision=gone.revision + 1), deleted=True)


async def encrypt_again(uow: UnitOfWork, box: CredentialBox) -> int:
    """Encrypt every stored credential made with another key than the first one again under it (key rotation);
    how many. A credential no configured key decrypts is left as it is, and named in the log."""
    repo, done = store(uow), 0
    for stored in await repo.encrypted_otherwise(box.key_id, limit=None):
        try:
            token = box.rotate(stored.token)
        except UnreadableCredentials:
            log.error("the credentials of login %s decrypt with none of the configured keys", stored.login_id)
            continue
        await repo.set_credentials(stored.login_id, token, box.key_id)
        done += 1
    return done
