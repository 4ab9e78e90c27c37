"""The exit codes of ``assent``, which scripts may rely on: the one table of them (``assent codes`` prints it).

Each member of :class:`ExitCode` has a one-line ``summary`` and a ``description`` (also its ``__doc__``). This module
imports nothing but the standard library and does nothing when imported.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """How an ``assent`` command ended. An answer of the API ends the command with the code of its HTTP status
    (:meth:`of_status`); the CLI's own findings (a URL that does not fit, no open request at that seq) with theirs."""

    summary: str
    """One line: what the code means, and the HTTP statuses that give it."""
    description: str
    """What ends a command with it."""

    def __new__(cls, value: int, summary: str, description: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.summary = summary
        member.description = description
        member.__doc__ = description
        return member

    OK = (
        0,
        "ok",
        "The command did what it said (Apply all that left requests to be decided on their own is ok).",
    )
    FAILED = (
        1,
        "failed (anything else)",
        "Anything else: an unexpected answer, an owner that failed to carry a decision out (502), a config file that "
        "cannot be read or names a setting it may not.",
    )
    USAGE = (
        2,
        "usage: a command line or a gateway URL that does not fit",
        "A command line that does not fit (an unknown option, a missing argument); a gateway URL without http:// or "
        "https://; a URL where a server answers but not as Assent's API (a path after the gateway's base URL, "
        "another server). The message says what to write.",
    )
    AUTH = (
        3,
        "not authenticated or not allowed (401, 403)",
        "401: no token was given (the message says the three ways to give one), or the token given was refused; "
        "403: the token's roles do not allow it.",
    )
    NOT_FOUND = (
        4,
        "not found (404)",
        "No such session, login, agent or proposal in the token's organisation, or no open request at that seq of "
        "the session (``assent pending SESSION`` lists the open ones).",
    )
    CONFLICT = (
        5,
        "conflict: stale, still waiting, still running (409)",
        "The target changed since it was read (stale; also when a stale apply stops Apply all), the turn still "
        "waits on decisions, a login is not connected or its request was answered already, or a request with the "
        "same Idempotency-Key is still running.",
    )
    REFUSED = (
        6,
        "refused or decided already (400, 422)",
        "The request was decided already (a decision on it: the API's answer says how, by whom and when; ``show`` of "
        "it says the same), or refused as it stands: a decision that does not fit, a body that does not fit, an "
        "Idempotency-Key used for another request.",
    )
    UNAVAILABLE = (
        7,
        "unavailable or late (503, 504, no answer)",
        "The gateway or an owner cannot answer now, or nothing answers at the gateway's URL; after a 504 the "
        "decision still stands.",
    )
    BROKEN = (
        8,
        "the audit log does not hold",
        "``audit verify`` found an entry of the history that does not fit its chain (edited, missing, or not linked "
        "to the one before it), or a signed checkpoint that does not hold; the message names the first.",
    )

    @classmethod
    def of_status(cls, status: int) -> ExitCode:
        """The exit code of an HTTP status (below 400: :attr:`OK`)."""
        if status < 400:
            return cls.OK
        if status in (401, 403):
            return cls.AUTH
        if status == 404:
            return cls.NOT_FOUND
        if status == 409:
            return cls.CONFLICT
        if status in (400, 422):
            return cls.REFUSED
        if status in (503, 504):
            return cls.UNAVAILABLE
        return cls.FAILED
