"""The read-only policy: whether the proxy may call a tool listed on a login, and whether the tool changes data.

It is the seed's ``isReadOnlyRemote``, in this order:

1. a tool that is off by default (``default_off``) is refused;
2. a tool the connector's manifest lists (``mutating`` true or false) is readable unless it is mutating;
3. a tool marked ``readOnlyHint`` (by its MCP server) is readable on a verified connector; on any other the hint
   does not count, and the tool falls to the next rule;
4. any other tool is classified by the verbs in its name: a word of :data:`WRITE_VERBS` makes it change data, else a
   word of :data:`READ_VERBS` makes it readable, else it is taken to change data (a name that says nothing is not
   trusted).

:func:`classify` is the one place that says it: the proxy calls by it, the login's catalog (``changes_data``, which
the access service reads) and the workspace API's ``readable`` come from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

READ_VERBS: frozenset[str] = frozenset(
    {
        "browse",
        "check",
        "compare",
        "count",
        "describe",
        "diff",
        "download",
        "estimate",
        "explain",
        "fetch",
        "find",
        "get",
        "inspect",
        "list",
        "lookup",
        "peek",
        "preview",
        "query",
        "read",
        "retrieve",
        "search",
        "show",
        "summarize",
        "view",
    }
)
"""Words that name a tool that only reads: ``list_orders``, ``getTicket``, ``search-issues``."""

WRITE_VERBS: frozenset[str] = frozenset(
    {
        "accept",
        "add",
        "apply",
        "approve",
        "archive",
        "assign",
        "attach",
        "ban",
        "block",
        "book",
        "buy",
        "call",
        "cancel",
        "change",
        "charge",
        "clear",
        "close",
        "comment",
        "commit",
        "complete",
        "copy",
        "create",
        "decline",
        "delete",
        "deploy",
        "destroy",
        "detach",
        "disable",
        "drop",
        "edit",
        "enable",
        "erase",
        "execute",
        "follow",
        "grant",
        "import",
        "insert",
        "install",
        "invite",
        "invoke",
        "join",
        "kill",
        "label",
        "leave",
        "link",
        "lock",
        "mark",
        "merge",
        "modify",
        "move",
        "notify",
        "open",
        "order",
        "pay",
        "pin",
        "post",
        "provision",
        "publish",
        "purge",
        "push",
        "put",
        "refund",
        "register",
        "reject",
        "remove",
        "rename",
        "reopen",
        "reply",
        "reschedule",
        "reset",
        "resolve",
        "restart",
        "restore",
        "revoke",
        "run",
        "save",
        "schedule",
        "sell",
        "send",
        "set",
        "share",
        "start",
        "stop",
        "submit",
        "subscribe",
        "sync",
        "tag",
        "terminate",
        "transfer",
        "trigger",
        "unassign",
        "unblock",
        "uninstall",
        "unlink",
        "unlock",
        "unpin",
        "unsubscribe",
        "update",
        "upload",
        "upsert",
        "vote",
        "write",
    }
)
"""Words that name a tool that changes data: ``create_issue``, ``updateTicket``, ``get_or_create_user``. A name that
holds one of these changes data even when it also holds a read verb."""

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_words(name: str) -> tuple[str, ...]:
    """The words of a tool's name, lowercased: split at ``_``, ``-``, ``.``, ``/``, spaces, digits and camelCase
    (``getHTTPStatus`` is ``get``, ``http``, ``status``)."""
    return tuple(word.lower() for word in _WORD.findall(name))


@dataclass(frozen=True)
class ToolSpec:
    """One tool of a login's manifest.

    ``read_only_hint`` is what the tool's MCP server says (``ToolAnnotations.readOnlyHint``); ``mutating`` is the
    connector manifest's word on it (None: the manifest does not list the tool); ``default_off``: off until an
    agent's access turns it on, and never called through the proxy.
    """

    name: str
    description: str = ""
    read_only_hint: bool = False
    default_off: bool = False
    mutating: bool | None = None


@dataclass(frozen=True)
class Verdict:
    """The policy's word on one tool: whether the proxy may call it (``readable``), whether it changes data (as if it
    were on: a default-off tool changes data or not all the same), the rule that decided, and why, in words."""

    readable: bool
    changes_data: bool
    rule: str
    reason: str


def classify(tool: ToolSpec, *, verified: bool) -> Verdict:
    """The read-only policy on ``tool`` of a login whose connector is ``verified`` (or not)."""
    kind = _changes_data(tool, verified=verified)
    if tool.default_off:
        return Verdict(False, kind.changes_data, "default_off", f"{tool.name} is off by default")
    return kind


def _changes_data(tool: ToolSpec, *, verified: bool) -> Verdict:
    """Rules 2 to 4: whether the tool only reads."""
    if tool.mutating is not None:
        if tool.mutating:
            return Verdict(False, True, "manifest", f"the connector's manifest lists {tool.name} as changing data")
        return Verdict(True, False, "manifest", f"the connector's manifest lists {tool.name} as read-only")
    if tool.read_only_hint and verified:
        return Verdict(True, False, "read_only_hint", f"{tool.name} is marked read-only on a verified connector")
    words = name_words(tool.name)
    hint = " (its read-only hint counts on a verified connector only)" if tool.read_only_hint else ""
    writes = [word for word in words if word in WRITE_VERBS]
    if writes:
        return Verdict(False, True, "verbs", f"the name {tool.name} says it changes data ({writes[0]!r}){hint}")
    reads = [word for word in words if word in READ_VERBS]
    if reads:
        return Verdict(True, False, "verbs", f"the name {tool.name} says it reads ({reads[0]!r})")
    return Verdict(
        False, True, "verbs", f"the name {tool.name} names no read verb, so it is taken to change data{hint}"
    )
