"""The builder chat's own rules: when Studio shows it, who may use it, and its one chance to fix a file.

**Declared.** The builder chat shows for an agent whose active deployment declares ``propose_source_change`` for
its main agent or one of its named agents (:func:`declarations`, read at the version the deployment recorded):

- the main agent (default chat): ``agents/main/agent.json``, read only when ``agents/main/AGENT.md`` exists and
  holds more than white space;
- a named agent ``<name>``: ``agents/<name>/agent.json``, or ``agents/<name>/agent.ts``.

``agent.json`` declares it when it is a JSON object whose ``tools`` is a list holding the string
``"propose_source_change"``. ``agent.ts`` is not run: it declares it only when, with its comments removed, it holds
an array literal ``tools: [...]`` (or ``tools = [...]``) of plain string literals one of which is
``propose_source_change``; anything else (a spread, a variable, a computed list) is not recognised, so a file the
deployer cannot read for certain never shows the chat. It also shows when the agent already has a proposal from
chat (an agent's chat or the builder chat; an issue's fix is not one).

**Who.** Anyone with permission to edit the agent's source: an organisation admin or developer, or the agent's
owner or editor. A tool call carries its requester (user, organisation) but not their organisation roles, which
only their token holds: the gateway decides from the token before Studio opens the chat
(``GET /api/agents/{id}/builder-chat``), and the deployer refuses the calls it can tell are not allowed
(:func:`requester_refusal`): a chat on a token minted with an API key (no person), and a person of another
organisation who neither owns nor edits the agent.

**A new agent that proposes changes to itself.** Created with ``propose_changes_to_itself``, a hosted agent's first
source version holds both main-agent files (:data:`SELF_EDITING`): ``agents/main/agent.json`` declaring
``list_repo_files``, ``read_repo_file`` and ``propose_source_change``, and ``agents/main/AGENT.md``, a prompt that is
not empty (without one the declaration is not read). Once deployed, it declares the tool, so the builder chat shows.

**One chance.** When a file of a builder proposal does not pass the file checks (:data:`FILE_CHECKS`), the first
such call of a reply (a turn) is refused with the problem and a hint that it may try once more; every later one of
the same reply is refused with "nothing was proposed" and the problem (:func:`one_chance`). A new reply gets a
new chance.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from assent.contracts import Requester
from assent.domain import Refusal

TOOL = "propose_source_change"
MAIN = "main"

FILE_CHECKS = frozenset({"invalid_json", "invalid_format", "literal_credential", "secret_value", "wrong_location"})
"""The refusals of a file's checks (every JSON file, connection, store and eval formats, no secret value, where a
new file sits) that the builder may fix once within its reply. Path rules (``.env`` files, keys, build folders),
an unreadable file or a deleted unread file are refused plainly: retrying the same call cannot fix them."""


SELF_EDITING: Mapping[str, str] = MappingProxyType(
    {
        f"agents/{MAIN}/agent.json": json.dumps({"tools": ["list_repo_files", "read_repo_file", TOOL]}) + "\n",
        f"agents/{MAIN}/AGENT.md": (
            "# Main agent\n\n"
            "You are a new agent; your instructions are still to be written.\n\n"
            'When someone asks you to change how you work ("from now on, confirm before refunding"), read your source '
            "with list_repo_files and read_repo_file, then propose the change with propose_source_change. You cannot "
            "change yourself: a person reviews each proposal on the Proposals page, and approving it deploys it.\n"
        ),
    }
)
"""What "Let the agent propose changes to itself" writes into a new agent's first source version."""


def with_self_editing(files: Mapping[str, str]) -> dict[str, str] | Refusal:
    """``files`` and the files of :data:`SELF_EDITING`; a file of ``files`` that the option writes is refused."""
    clash = sorted(set(files) & set(SELF_EDITING))
    if clash:
        return Refusal(
            422,
            "written_by_option",
            f"{', '.join(clash)}: propose_changes_to_itself writes {' and '.join(SELF_EDITING)}; leave "
            f"{'it' if len(clash) == 1 else 'them'} out of files, or leave the option off",
        )
    return {**files, **SELF_EDITING}


@dataclass(frozen=True)
class Declaration:
    agent: str
    path: str


def candidate_paths(tree: Iterable[str]) -> list[str]:
    """The files of ``tree`` that may hold a declaration (and the main agent's prompt, which gates its file)."""
    found = []
    for path in tree:
        parts = path.split("/")
        if len(parts) != 3 or parts[0] != "agents":
            continue
        if parts[2] == "agent.json" or (parts[2] == "agent.ts" and parts[1] != MAIN):
            found.append(path)
        elif parts[1] == MAIN and parts[2] == "AGENT.md":
            found.append(path)
    return sorted(found)


def json_declares(text: str) -> bool:
    try:
        document = json.loads(text)
    except ValueError:
        return False
    if not isinstance(document, dict):
        return False
    tools = document.get("tools")
    return isinstance(tools, list) and TOOL in [t for t in tools if isinstance(t, str)]


_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_TOOLS_ARRAY = re.compile(r"\btools\s*[:=]\s*\[([^\[\]]*)\]")
_STRING = re.compile(r"""\s*(?:'([^'\\\n]*)'|"([^"\\\n]*)"|`([^`\\$]*)`)\s*""")


def ts_declares(text: str) -> bool:
    """Whether ``agent.ts`` lists the tool in an array literal of plain strings (see the module's rules)."""
    code = _COMMENTS.sub(" ", text)
    for match in _TOOLS_ARRAY.finditer(code):
        items = match.group(1).split(",")
        if items and not items[-1].strip():
            items = items[:-1]  # a trailing comma
        names: list[str] = []
        for item in items:
            string = _STRING.fullmatch(item)
            if string is None:
                names = []
                break  # not a plain list of strings: not recognised
            names.append(next(g for g in string.groups() if g is not None))
        if TOOL in names:
            return True
    return False


def declarations(texts: Mapping[str, str | None]) -> list[Declaration]:
    """Which agents declare the tool, from the texts of :func:`candidate_paths` (None: unreadable)."""
    found = []
    for path, text in sorted(texts.items()):
        if text is None:
            continue
        _, name, file = path.split("/")
        if name == MAIN:
            prompt = texts.get(f"agents/{MAIN}/AGENT.md")
            if file != "agent.json" or prompt is None or not prompt.strip():
                continue
        declared = json_declares(text) if file == "agent.json" else file == "agent.ts" and ts_declares(text)
        if declared:
            found.append(Declaration(name, path))
    return found


def shown_reason(declared: list[Declaration], has_chat_proposal: bool) -> tuple[bool, str]:
    if declared:
        where = ", ".join(d.path for d in declared)
        return True, f"the active deployment declares {TOOL} in {where}"
    if has_chat_proposal:
        return True, "the agent already has a proposal from chat"
    return False, (
        f"the active deployment declares {TOOL} for no agent (agents/main/agent.json with agents/main/AGENT.md, or "
        f"agents/<name>/agent.json or agent.ts), and the agent has no proposal from chat"
    )


def requester_refusal(
    requester: Requester | None, session_org: str, agent_id: str, owners: Iterable[str], editors: Iterable[str]
) -> Refusal | None:
    """Refuse a builder chat whose requester cannot have permission to edit the agent's source, as far as the
    call tells (it carries no organisation roles; see the module's rules). None: the call may go on."""
    if requester is None:
        return None  # a chat run for its operator, who opened it
    if requester.user_id is None:
        return Refusal(
            403,
            "builder_not_allowed",
            "the builder chat needs a person with permission to edit the agent's source; this chat runs on a token "
            "minted with an API key",
        )
    outside = requester.org_id is not None and requester.org_id != session_org
    if outside and requester.user_id not in {*owners, *editors}:
        return Refusal(
            403,
            "builder_not_allowed",
            f"{requester.user_id} may not use the builder chat of agent {agent_id!r}: it needs permission to edit "
            "the agent's source (an admin or developer of its organisation, or its owner or editor)",
        )
    return None


def one_chance(problem: Refusal, earlier_failures: int) -> Refusal:
    """The answer to a builder proposal refused by a file check, given how many of the reply's calls failed one
    before it: the first gets its problem and one more try; every later one proposes nothing."""
    if earlier_failures == 0:
        return Refusal(
            problem.status,
            problem.code,
            f"{problem.message}. Fix the file and call {TOOL} again: this reply has one more try",
        )
    return Refusal(
        problem.status,
        problem.code,
        f"nothing was proposed: {problem.message}. This reply used its one chance to fix a file; tell the user "
        "what failed, and ask again in a new message",
    )
