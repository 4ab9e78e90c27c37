"""The ``guild`` kind: ``studio_read_guild`` and ``studio_edit_guild`` (the source guild's text)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from assent.contracts import CardField, DecisionMade, ProposalBase, ProposalTarget
from assent.domain import Refusal, check_source_guild
from assent.runtime import (
    Applied,
    Call,
    Inverse,
    LiveView,
    Output,
    Proposal,
    ProposalKind,
    Stale,
    StoredProposal,
    Tool,
)
from assent.runtime.uow import UnitOfWork

from .. import workspace
from ..adapters.repository import EditsRepository
from ..domain import guild as rules
from .outcomes import MovedTo


class GuildEdit(BaseModel):
    """What applying a guild text request writes (its ``payload``): each changed field's new text, in card order; and
    each one's text as it was read (``before``: what the request replaces once applied, since applying needs the text
    as read; guild text keeps no history of its own). A request proposed before ``before`` was kept has none."""

    model_config = ConfigDict(frozen=True)

    changes: dict[str, str]
    before: dict[str, str] = Field(default_factory=dict)


class GuildWritten(BaseModel):
    """What an applied guild text request wrote: the hash of both fields now, and the fields it changed."""

    model_config = ConfigDict(frozen=True)

    hash: str
    fields: list[str]


def repo(uow: UnitOfWork) -> EditsRepository:
    return uow.store(EditsRepository)


class GuildKind(ProposalKind):
    name = "guild"
    reads_proposals = False  # its rules read the targets, never the proposals table

    def __init__(self, about_max: int = rules.ABOUT_MAX, description_max: int = rules.DESCRIPTION_MAX) -> None:
        self.limits = {"about": about_max, "description": description_max}

    def tools(self) -> dict[str, Tool]:
        return {
            "studio_read_guild": Tool(rules.ReadGuild, self.read),
            "studio_edit_guild": Tool(rules.EditGuild, self.propose),
        }

    async def read(self, call: Call, args: rules.ReadGuild, uow: UnitOfWork) -> Output | Refusal:
        """The session's source guild as the coach's context holds it: the snapshot an apply refreshes.

        A session whose guild did not exist when it opened (no snapshot) reads the live guild.
        """
        snapshot = call.session.source_guild_snapshot
        if snapshot is not None:
            return Output({name: snapshot.get(name) for name in ("guild_id", "name", "about", "description")})
        guild = await uow.workspace.guild(call.session.source_guild_id)
        refusal = check_source_guild(call.session, guild)
        if refusal is not None:
            return refusal
        assert guild is not None
        return Output(rules.snapshot(guild))

    async def propose(self, call: Call, args: rules.EditGuild, uow: UnitOfWork) -> Proposal | Refusal:
        guild = await uow.workspace.guild(call.session.source_guild_id)
        reviewed = rules.review_edit(call.session, guild, args, self.limits)
        if isinstance(reviewed, Refusal):
            return reviewed
        return Proposal(
            action="edit",
            target=ProposalTarget(kind="guild", guild_id=reviewed.guild_id, label=f"Guild {reviewed.guild_name}"),
            base=ProposalBase(version=reviewed.base_version, hash=reviewed.base_hash),
            proposed_hash=reviewed.proposed_hash,
            reason=reviewed.reason,
            before=reviewed.before,
            after=reviewed.after,
            fields=tuple(
                CardField(name=name, before=reviewed.before_fields[name], after=value)
                for name, value in reviewed.changes.items()
            ),
            payload=GuildEdit(changes=reviewed.changes, before=reviewed.before_fields).model_dump(mode="json"),
        )

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        guild = await uow.workspace.guild(proposal.target.get("guild_id") or "")
        changes = GuildEdit.model_validate(proposal.payload).changes
        return LiveView(
            hash=None if guild is None else rules.guild_hash(guild),
            version=None if guild is None else guild.revision,
            fields=tuple(
                CardField(name=name, before=None if guild is None else getattr(guild, name), after=value)
                for name, value in changes.items()
            ),
        )

    async def inverse(self, proposal: StoredProposal, uow: UnitOfWork) -> Inverse | Refusal:
        """Each field the request changed, back to its text as the request read it (which is what it replaced: it
        applies only over the text as read), proposed over the guild's text as it is now."""
        edit = GuildEdit.model_validate(proposal.payload)
        if not edit.before:
            return Refusal(409, "before_unknown", "the guild's text before this request is not kept")
        guild = await uow.workspace.guild(proposal.target.get("guild_id") or "")
        if guild is None:
            return Refusal(409, "before_unknown", "the guild does not exist any more")
        if all(getattr(guild, name) == text for name, text in edit.before.items()):
            return Refusal(409, "already_reverted", "the guild's text already reads as it did before this request")
        return Inverse("studio_edit_guild", dict(edit.before))

    async def apply(self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork) -> Applied | Stale:
        guild_id = proposal.target.get("guild_id") or ""
        guild = await uow.workspace.guild(guild_id, for_update=True)
        if rules.moved(proposal.base.get("hash"), guild):
            return Stale(
                f"the guild's text changed since the coach read it (base revision {proposal.base.get('version')}, "
                f"live revision {None if guild is None else guild.revision}); the request stays pending",
                {} if guild is None else MovedTo(live_version=guild.revision).model_dump(mode="json"),
            )
        changes = GuildEdit.model_validate(proposal.payload).changes
        updated = await workspace.update_guild_text(uow, guild_id, changes)
        for name in changes:
            await repo(uow).log_guild_change(
                guild_id,
                name,
                decision.actor,
                tool_call_id=proposal.tool_call_id,
                session_id=proposal.session_id,
                seq=proposal.seq,
            )
        await uow.sessions.set_snapshot(proposal.session_id, rules.snapshot(updated))
        return Applied(
            f"applied; the guild's {' and '.join(changes)} changed (revision {updated.revision})",
            updated.revision,
            GuildWritten(hash=proposal.proposed_hash, fields=list(changes)).model_dump(mode="json"),
        )
