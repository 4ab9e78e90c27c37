"""Guild text requests: ``studio_edit_guild(about?, description?, reason)`` and ``studio_read_guild()``.

The coach proposes a new short description (``about``), a new description, or both, for the session's
source guild. The request binds the guild's revision and a hash of both fields as they were read; applying
refuses when either field moved since. Each field has a length limit in characters, on every write path.
A field equal to the live value is not a change, and a request that changes nothing is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from assent.contracts import Text
from assent.domain import Guild, Refusal, Session, check_source_guild
from assent.hashing import content_hash
from edits_contract.workspace import TEXT_ABOUT_MAX, TEXT_DESCRIPTION_MAX

ABOUT_MAX = TEXT_ABOUT_MAX
"""The short description's limit, in characters (the public API's schema says it too)."""
DESCRIPTION_MAX = TEXT_DESCRIPTION_MAX
"""The description's limit, in characters."""
LIMITS: dict[str, int] = {"about": ABOUT_MAX, "description": DESCRIPTION_MAX}
FIELDS: tuple[str, ...] = ("about", "description")
"""The guild's text fields, in the order a card shows them."""

Reason = Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]


class EditGuild(BaseModel):
    """Arguments of ``studio_edit_guild(about?, description?, reason)``: each given field's complete new text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    about: Text | None = None
    description: Text | None = None
    reason: Reason

    def given(self) -> dict[str, str]:
        return {name: value for name in FIELDS if (value := getattr(self, name)) is not None}


class ReadGuild(BaseModel):
    """Arguments of ``studio_read_guild()``: none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def canonical(about: str, description: str) -> str:
    """The text a guild's hash is taken over: both fields, as JSON with sorted keys."""
    return json.dumps({"about": about, "description": description}, sort_keys=True)


def text_hash(about: str, description: str) -> str:
    return content_hash(canonical(about, description))


def guild_hash(guild: Guild) -> str:
    return text_hash(guild.about, guild.description)


def render(about: str, description: str) -> str:
    """Both fields as one text, for the card's whole-target before/after (its line counts are the fields' own: an
    empty field renders as a blank line, which is no line of the guild's)."""
    return f"About:\n{about}\n\nDescription:\n{description}\n"


def check_lengths(fields: dict[str, str], limits: dict[str, int] | None = None) -> Refusal | None:
    """Each given field within its limit in characters (422 ``field_too_long`` naming the field)."""
    for name, value in fields.items():
        limit = (limits or LIMITS)[name]
        if len(value) > limit:
            return Refusal(
                422,
                "field_too_long",
                f"the guild's {name} is {len(value)} characters; its limit is {limit} characters",
            )
    return None


def changed(guild: Guild, fields: dict[str, str]) -> dict[str, str]:
    """The given fields whose value differs from the live one, in card order."""
    return {name: value for name, value in fields.items() if value != getattr(guild, name)}


def snapshot(guild: Guild) -> dict[str, str]:
    """A session's ``source_guild_snapshot``: what the coach's next turn reads of its source guild."""
    return {"guild_id": guild.guild_id, "name": guild.name, "about": guild.about, "description": guild.description}


@dataclass(frozen=True)
class GuildProposal:
    """A reviewed, acceptable guild text edit: what it binds, what it changes, what its card shows."""

    guild_id: str
    guild_name: str
    base_version: int
    base_hash: str
    proposed_hash: str
    changes: dict[str, str]
    before_fields: dict[str, str]
    before: str
    after: str
    reason: str


def review_edit(
    session: Session, guild: Guild | None, args: EditGuild, limits: dict[str, int] | None = None
) -> GuildProposal | Refusal:
    """Check reach, that a field is given, the field limits, and that something changes; write nothing."""
    refusal = check_source_guild(session, guild)
    if refusal is not None:
        return refusal
    assert guild is not None
    given = args.given()
    if not given:
        return Refusal(422, "no_fields", "studio_edit_guild needs about, description, or both")
    refusal = check_lengths(given, limits)
    if refusal is not None:
        return refusal
    changes = changed(guild, given)
    if not changes:
        return Refusal(422, "no_change", "the proposed guild text is the same as the live text")
    after = {"about": guild.about, "description": guild.description, **changes}
    return GuildProposal(
        guild_id=guild.guild_id,
        guild_name=guild.name,
        base_version=guild.revision,
        base_hash=guild_hash(guild),
        proposed_hash=text_hash(after["about"], after["description"]),
        changes=changes,
        before_fields={name: getattr(guild, name) for name in changes},
        before=render(guild.about, guild.description),
        after=render(after["about"], after["description"]),
        reason=args.reason,
    )


def moved(base_hash: str | None, guild: Guild | None) -> bool:
    """Whether the guild's text changed since the proposal read it (apply then refuses with 409)."""
    return guild is None or guild_hash(guild) != base_hash
