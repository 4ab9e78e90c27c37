"""Organisations are walls, on owners' internal APIs too.

The gateway authenticates people and calls an owner for one of them with ``X-Assent-Org``: the person's
organisation. An owner then answers 404 for another organisation's entities, in the words it uses for one that
does not exist. Without the header the call is a service's own (the service credential still admits it).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header

ORG_HEADER = "X-Assent-Org"


async def caller_org(
    org: Annotated[
        str | None, Header(alias=ORG_HEADER, min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
    ] = None,
) -> str | None:
    """The organisation of the person the call is made for (``X-Assent-Org``), or ``None`` for a service's own."""
    return org


CallerOrg = Annotated[str | None, Depends(caller_org)]
