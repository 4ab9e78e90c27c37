"""The history on the public API: a page of the caller's organisation's entries (filtered, newest first, with an
opaque cursor), the export of every entry that a filter selects (JSON Lines or CSV, oldest first), the check of
the chain (:func:`gateway.domain.audit.first_break`) and of its signed checkpoints, a page of those checkpoints,
and the public keys that verify them. Another organisation's entries and checkpoints are never read: the
organisation is the caller's, never a parameter.
"""

import csv
import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict

from assent.api import Error
from assent.http import Identifier

from .adapters import checkpoints
from .adapters.history import CURSOR, CheckedCheckpoint, HistoryReader, decode_cursor, encode_cursor
from .adapters.history import Query as Selection
from .answers import PERSON_ERRORS
from .decisions import decision_path
from .domain.audit import Break, Entry
from .domain.checkpoints import Checkpoint
from .handlers import Deps, Refused

EXPORT_COLUMNS = (*Entry.model_fields, "link")


class HistoryEntry(Entry):
    """An entry of the history, with ``link``: the API path of its proposal's card (None for an entry of no
    proposal: a continuation, a direct write)."""

    link: str | None


class HistoryPage(BaseModel):
    """A page of history, newest first; ``next_cursor`` reads the page after it (None: this is the last)."""

    entries: list[HistoryEntry]
    next_cursor: str | None


class Verification(BaseModel):
    """What a check of the chain found: the positions checked (``first`` to ``last``), how many fit, the first entry
    that did not and why (``first_break``: null when all fit; ``checkpoint`` when a signed checkpoint does not
    hold), the chain's head hash, the oldest position kept (``kept_from``: after the newest pruned checkpoint, else
    0), how many signed checkpoints were checked (``checkpoints_checked``: the newest pruned one, every head one in
    the range, and for a range to the head any past it) and the ones to show (``checkpoints``: the newest pruned
    one, the newest head one that held, the first that did not, each with ``ok`` and why not), the id of the key
    that signs checkpoints now (null: none is configured, and no checkpoint is made), and how many entries wait to
    be linked (written with their change, chained within seconds) and since when."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    first: int
    last: int
    checked: int
    ok: bool
    first_break: Break | None
    head: str | None
    kept_from: int
    checkpoints: list[CheckedCheckpoint]
    checkpoints_checked: int
    signing_key_id: str | None
    unlinked: int
    oldest_unlinked_at: datetime | None


class CheckpointPage(BaseModel):
    """A page of signed checkpoints, newest first; ``next_cursor`` reads the page after it (None: the last)."""

    checkpoints: list[Checkpoint]
    next_cursor: str | None


class PublicKey(BaseModel):
    """A key that verifies checkpoints: its id (the first 16 hex digits of the SHA-256 of its raw bytes), its 32 raw
    bytes in base64, and whether it signs now (``current``) or only verifies (``retired``)."""

    key_id: str
    algorithm: Literal["Ed25519"] = "Ed25519"
    public_key: str
    status: Literal["current", "retired"]


class PublicKeys(BaseModel):
    """The keys that verify checkpoints, the signing one first; ``signing_key_id`` is null when none signs."""

    signing_key_id: str | None
    keys: list[PublicKey]


class _Located(BaseModel):
    kind: str
    session_id: str
    seq: int
    agent_id: str | None
    proposal_id: str


Agent = Annotated[Identifier | None, Query(description="Entries of this agent")]
Guild = Annotated[Identifier | None, Query(description="Entries of this guild (the agent's, else the session's)")]


def _not_a_number(value: object) -> object:
    # A query's time is RFC 3339 text; pydantic would read a bare number as seconds since 1970.
    if isinstance(value, str) and value.replace(".", "", 1).lstrip("-").isdigit():
        raise ValueError("must be a time in RFC 3339 (2026-12-01T00:00:00Z), not a number")
    return value


def _bounded(at: datetime | None) -> datetime | None:
    """``at`` in UTC; a time whose UTC is out of the calendar's range, at its end."""
    if at is None:
        return None
    try:
        return at.astimezone(UTC)
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC) if at.year == 1 else datetime.max.replace(tzinfo=UTC)


LINE = r"^[^\x00-\x1f\x7f]*$"
Kind = Annotated[str | None, Query(max_length=64, pattern=LINE, description="Entries of this kind")]
Actor = Annotated[
    str | None, Query(max_length=256, pattern=LINE, description="Entries by this actor (a person, a service, coach)")
]
Outcome = Annotated[
    str | None, Query(max_length=32, pattern=LINE, description="Outcomes of this kind (applied, declined, …)")
]
Session = Annotated[Identifier | None, Query(description="Entries of this session")]
Type = Annotated[
    Literal["proposed", "decided", "approved", "outcome", "continued", "written"] | None,
    Query(alias="type", description="Entries of this type"),
]
Since = Annotated[
    AwareDatetime | None,
    BeforeValidator(_not_a_number),
    Query(description="Entries at or after this time (RFC 3339, with its zone)"),
]
Until = Annotated[
    AwareDatetime | None,
    BeforeValidator(_not_a_number),
    Query(description="Entries before this time (RFC 3339, with its zone; none when it is not after since)"),
]


def link_of(entry: Entry) -> str | None:
    """The API path of the card of the entry's proposal, where a client reads it (and decides it while pending)."""
    if entry.proposal_id is None or entry.kind is None or entry.session_id is None or entry.seq is None:
        return None
    try:
        return decision_path(
            _Located(
                kind=entry.kind,
                session_id=entry.session_id,
                seq=entry.seq,
                agent_id=entry.agent_id,
                proposal_id=entry.proposal_id,
            )
        )
    except KeyError:  # a kind this release no longer has
        return None


def shown(entry: Entry) -> HistoryEntry:
    return HistoryEntry(**entry.model_dump(), link=link_of(entry))


def router(deps: Deps, user: Any) -> APIRouter:
    """The history's routes; ``user`` is the authenticating dependency."""
    routes = APIRouter(tags=["history"], responses=PERSON_ERRORS)
    keys = deps.history_keys
    reader = HistoryReader(deps.engine, keys)

    def selection(
        person: Any,
        agent: str | None,
        guild: str | None,
        kind: str | None,
        actor: str | None,
        outcome: str | None,
        session: str | None,
        type_: str | None,
        since: datetime | None,
        until: datetime | None,
    ) -> Selection:
        given = {
            "agent_id": agent,
            "guild_id": guild,
            "kind": kind,
            "actor": actor,
            "outcome": outcome,
            "session_id": session,
            "type": type_,
        }
        return Selection(
            org_id=person.org_id,
            filters=tuple((name, value) for name, value in given.items() if value is not None),
            since=_bounded(since),
            until=_bounded(until),
        )

    @routes.get(
        "/api/history",
        response_model=HistoryPage,
        responses={422: {"model": Error, "description": "A filter, a time range or a cursor that does not fit"}},
    )
    async def history_page(
        person: user,
        agent: Agent = None,
        guild: Guild = None,
        kind: Kind = None,
        actor: Actor = None,
        outcome: Outcome = None,
        session: Session = None,
        type_: Type = None,
        since: Since = None,
        until: Until = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[
            str | None, Query(pattern=CURSOR, description="next_cursor of the page before (opaque: pass it as given)")
        ] = None,
    ) -> HistoryPage:
        """The caller's organisation's history, newest first: every proposal, decision, outcome, continuation and
        direct write, each with its actor, time, session and seq, kind, target, the hashes before and after, and
        the link to its card. Entries that arrive while a client pages do not move its cursor."""
        query = selection(person, agent, guild, kind, actor, outcome, session, type_, since, until)
        before = None
        if cursor is not None:
            try:
                before = decode_cursor(cursor)
            except ValueError as error:
                raise Refused(422, str(error)) from None
        entries, more = await reader.page(query, limit, before)
        return HistoryPage(
            entries=[shown(entry) for entry in entries], next_cursor=None if more is None else encode_cursor(more)
        )

    @routes.get(
        "/api/history/export",
        response_class=StreamingResponse,
        responses={
            200: {
                "content": {
                    "application/jsonl": {"schema": {"type": "string"}},
                    "text/csv": {"schema": {"type": "string"}},
                }
            },
            422: {"model": Error, "description": "A filter or a time range that does not fit"},
        },
    )
    async def history_export(
        person: user,
        format: Annotated[
            Literal["jsonl", "csv"], Query(description="JSON Lines or CSV (with a header row)")
        ] = "jsonl",
        agent: Agent = None,
        guild: Guild = None,
        kind: Kind = None,
        actor: Actor = None,
        outcome: Outcome = None,
        session: Session = None,
        type_: Type = None,
        since: Since = None,
        until: Until = None,
    ) -> StreamingResponse:
        """Every entry the filters select, oldest first, as JSON Lines (one entry per line, as a page shows it) or
        CSV (a header row, then one row per entry; an empty cell is null). Unfiltered, the export is the chain
        itself: each entry's hash can be checked outside Assent as the docs describe."""
        query = selection(person, agent, guild, kind, actor, outcome, session, type_, since, until)
        media = "application/jsonl" if format == "jsonl" else "text/csv"
        body = _jsonl(reader, query) if format == "jsonl" else _csv(reader, query)
        return StreamingResponse(
            body,
            media_type=media,
            headers={"Content-Disposition": f'attachment; filename="history-{person.org_id}.{format}"'},
        )

    @routes.get("/api/history/verify", response_model=Verification)
    async def verify_history(
        person: user,
        first: Annotated[
            int | None, Query(ge=0, description="The first position to check (default: the oldest)")
        ] = None,
        last: Annotated[int | None, Query(ge=0, description="The last position to check (default: the head)")] = None,
    ) -> Verification:
        """Check the caller's organisation's chain over a range: every entry matches its hash and names the entry
        before it, and no position is missing; the kept chain goes on from the newest pruned checkpoint (a prefix
        removed by anyone but the retention job is a gap); every signed head checkpoint in the range holds (its
        signature, and the hash of the entry it names), and none names an entry past the head. ``first_break``
        names the first entry that does not fit."""
        found = await reader.verify(person.org_id, first, last)
        return Verification(**found.__dict__)

    @routes.get("/api/history/checkpoints", response_model=CheckpointPage)
    async def history_checkpoints(
        person: user,
        kind: Annotated[
            Literal["head", "pruned"] | None,
            Query(description="Only checkpoints of this kind: the chain's head, or the last entry a prune removed"),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[
            str | None,
            Query(pattern=checkpoints.CURSOR, description="next_cursor of the page before (opaque: pass it as given)"),
        ] = None,
    ) -> CheckpointPage:
        """The caller's organisation's signed checkpoints, newest first: each says, under the deployment's Ed25519
        key (``key_id``, listed at ``/api/history/keys``), that the entry at ``position`` had ``hash`` at ``at``;
        ``head`` checkpoints are signed at an interval while the chain grows, a ``pruned`` one names the last entry
        a prune removed. The signature covers the canonical encoding the docs give, so an export and a checkpoint
        can be checked outside Assent."""
        before = None if cursor is None else checkpoints.decode_cursor(cursor)  # the schema's pattern held
        found, more = await checkpoints.page(deps.engine, person.org_id, limit, before, kind)
        return CheckpointPage(checkpoints=found, next_cursor=None if more is None else checkpoints.encode_cursor(more))

    @routes.get("/api/history/keys", response_model=PublicKeys)
    async def history_keys(person: user) -> PublicKeys:
        """The public keys that verify the history's checkpoints: the one that signs now, and the retired ones
        that signed earlier checkpoints. Compare them with a copy kept outside Assent before trusting them."""
        return PublicKeys(
            signing_key_id=keys.signing_key_id,
            keys=[PublicKey(key_id=k.key_id, public_key=k.public_key, status=k.status) for k in keys.public_keys()],
        )

    return routes


async def _jsonl(reader: HistoryReader, query: Selection) -> AsyncIterator[str]:
    async for entry in reader.export(query):
        yield shown(entry).model_dump_json() + "\n"


async def _csv(reader: HistoryReader, query: Selection) -> AsyncIterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    async for entry in reader.export(query):
        row = json.loads(shown(entry).model_dump_json())
        writer.writerow(["" if row[name] is None else row[name] for name in EXPORT_COLUMNS])
        if buffer.tell() > 65536:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
