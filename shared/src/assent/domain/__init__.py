"""Rules every owner shares, as plain code with no I/O: who and what a session may reach, and the shape
of a refusal. Each owner's kinds build on these."""

from .model import Agent, Guild, Refusal, Session
from .reach import check_live_member, check_source_guild, invalid_arguments

__all__ = ["Agent", "Guild", "Refusal", "Session", "check_live_member", "check_source_guild", "invalid_arguments"]
