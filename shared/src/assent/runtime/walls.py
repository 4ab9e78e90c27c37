"""Organisations are walls, on owners' internal APIs too.

The gateway authenticates people and calls an owner for one of them with ``X-Assent-Org``: the person's
organisation. An owner then answers 404 for another organisation's entities, in the words it uses for one that
does not exist. Without the header the call is a service's own (the service credential still admits it). The
header is read as the declared routes read it (:class:`assent.api.Caller`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from ..api import ORG_HEADER, Caller, caller

__all__ = ["ORG_HEADER", "CallerOrg", "caller_org"]


async def caller_org(who: Annotated[Caller, Depends(caller)]) -> str | None:
    """The organisation of the person the call is made for (``X-Assent-Org``), or ``None`` for a service's own."""
    return who.org


CallerOrg = Annotated[str | None, Depends(caller_org)]
