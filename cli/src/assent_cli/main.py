"""``assent``: the operator's desk on the command line. It talks only to the gateway's public HTTP API.

Reads print a table (or the answer as JSON with ``--json``); decisions print what happened. Every decision, Apply all
and Decline all goes with an ``Idempotency-Key`` (``--key`` to choose it), so a retried command is decided once. The
exit code says how it went (``assent codes`` lists them; :mod:`assent_cli.exit_codes`).

A decision names its request by session and seq; the CLI finds it among the session's open requests (the tray
says where to send it and the words of its buttons). A request that is not open any more is still decided at the
API, which answers as it does for any client (a request applied already: 422, "already applied by ... at ...", exit
6): the CLI finds where (the card routes by seq, ``GET …/{endpoint}/{seq}``, of the endpoints of
``/console/kinds.json``) and sends the decision there. ``show`` of such a request prints its card as it was proposed
and what became of it: every decision taken on it, the outcome with its reason, and what the coach was told (as far
as its card tells); it says on stderr how it was decided, by whom and when, and exits 6. Where no route tells of the
seq, the CLI says plainly that the session has no open request there, and how to list the open ones.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .client import Api, ApiError, Failure, exit_code
from .config import BadUrl, ConfigError, load
from .exit_codes import ExitCode

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class State:
    def __init__(self, config_path: str | None, url: str | None, token: str | None) -> None:
        self.config_path, self.url, self.token = config_path, url, token
        self._api: Api | None = None

    @property
    def api(self) -> Api:
        if self._api is None:
            self._api = Api(load(self.config_path, self.url, self.token))
        return self._api


pass_state = click.make_pass_decorator(State)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
key_option = click.option("--key", help="The Idempotency-Key to send (a fresh one by default).")


class Desk(click.Group):
    """The command group: an API error or a bad config file ends the command with its exit code and the reason."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            err.print(f"[red]error[/red] {exc.status or 'no answer'}: {escape(exc.detail)}")
            if exc.hint:
                err.print(escape(exc.hint))
            raise click.exceptions.Exit(exc.code) from None
        except Failure as exc:
            err.print(f"[red]error[/red]: {escape(exc.message)}")
            raise click.exceptions.Exit(exc.code) from None
        except BadUrl as exc:
            err.print(f"[red]error[/red]: {escape(str(exc))}")
            raise click.exceptions.Exit(ExitCode.USAGE) from None
        except ConfigError as exc:
            err.print(f"[red]config[/red] {escape(str(exc))}")
            raise click.exceptions.Exit(ExitCode.FAILED) from None


@click.group(cls=Desk, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", envvar="ASSENT_CONFIG", help="The config file (TOML: url, token).")
@click.option(
    "--url",
    help="The gateway's base URL, with http:// or https:// (else ASSENT_URL, the config file, http://127.0.0.1:8100).",
)
@click.option("--token", help="The API token (else ASSENT_TOKEN, the config file).")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, url: str | None, token: str | None) -> None:
    """The operator's desk: sessions, pending items, decisions, logins and source proposals."""
    ctx.obj = State(config_path, url, token)
    ctx.call_on_close(lambda: ctx.obj._api.close() if ctx.obj._api is not None else None)


def main() -> None:
    """The ``assent`` command."""
    cli()


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 session``, ``2 sessions`` (``many``: the plural, where it is not ``word`` + s)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def emit(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        human(data)


# --- naming a session -----------------------------------------------------------------------------------------

LATEST = "\x00latest"
"""What ``--latest`` puts in the place of SESSION_ID while the command line is read (:class:`SessionCommand`)."""

MATCHES_SHOWN = 10
"""How many of the sessions an ambiguous prefix names the error lists."""


class SessionCommand(click.Command):
    """A command whose first argument names a session: SESSION_ID, any unique start of one, or ``--latest``.

    ``--latest`` stands in the place of SESSION_ID (the arguments after it keep theirs: ``assent apply --latest 3``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--latest" in args:
            cut = args.index("--") if "--" in args else len(args)
            if "--latest" in args[:cut]:
                args = [LATEST, *args]
        return super().parse_args(ctx, args)


def session_argument(optional: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """SESSION_ID (an id, or any unique start of one) and ``--latest`` (the organisation's newest open session), as
    the full id of the one session they name (:func:`resolve_session`); with ``optional``, neither: None."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def resolved(*args: Any, session_id: str | None, latest: bool, **kwargs: Any) -> Any:
            if latest and session_id not in (None, LATEST):
                raise click.UsageError("name a session by SESSION_ID or by --latest, not both")
            if latest or session_id is not None:
                state = click.get_current_context().find_object(State)
                assert state is not None
                session_id = resolve_session(state.api, None if latest else session_id)
            elif not optional:
                raise click.UsageError("name a session: SESSION_ID (or any unique start of one), or --latest")
            return command(*args, session_id=session_id, **kwargs)

        with_latest = click.option("--latest", is_flag=True, help="The organisation's newest open session.")(resolved)
        return click.argument("session_id", required=False)(with_latest)

    return decorate


def resolve_session(api: Api, given: str | None) -> str:
    """The one session of the organisation that ``given`` names (an id, or the start of one), or its newest open
    session (``given`` None).

    The gateway finds the matches (``GET /api/studio/sessions?prefix=``), in one request however many sessions the
    organisation has; an id it does not take as a prefix (a character no id has), or one that starts no id, goes to the
    API as it is, which says it has no such session (404, exit 4). Ambiguous: the error lists the matches (the newest
    first), exit 2."""
    if given is None:
        newest = api.get("/api/studio/sessions", state="open", page_size=1)["items"]
        if not newest:
            raise Failure(ExitCode.NOT_FOUND, "the organisation has no open session (`assent sessions` lists them all)")
        return str(newest[0]["session_id"])
    try:
        found = api.get("/api/studio/sessions", prefix=given, page_size=MATCHES_SHOWN)
    except ApiError as exc:
        if exc.status == 422:
            return given
        raise
    ids = [str(s["session_id"]) for s in found["items"] if str(s["session_id"]).startswith(given)]
    if given in ids:
        return given
    if len(ids) == 1 and found["total"] <= 1:
        return ids[0]
    if not ids:
        return given  # the API says it has no such session, in its own words (404, exit 4)
    more = found["total"] - len(ids)
    listed = "\n".join(f"  {session_id}" for session_id in ids) + (f"\n  … and {more} more" if more > 0 else "")
    raise Failure(
        ExitCode.USAGE,
        f"{given!r} starts the ids of {plural(found['total'], 'session')}; give more of the id:\n{listed}",
    )


# --- reads ----------------------------------------------------------------------------------------------------


@cli.command()
@click.option("--state", "only", type=click.Choice(["open", "closed"]), help="Only open or closed sessions.")
@click.option("--page", type=click.IntRange(1), default=1, show_default=True)
@click.option("--page-size", type=click.IntRange(1, 200), default=50, show_default=True)
@json_option
@pass_state
def sessions(state: State, only: str | None, page: int, page_size: int, as_json: bool) -> None:
    """The organisation's sessions, newest first, each with how many decisions it waits on and the names people know
    it by (its agents and coach, what its first request is about). Its id is never cut, whatever the width."""
    found = state.api.get("/api/studio/sessions", state=only, page=page, page_size=page_size)
    emit(found, as_json, show_sessions)


@cli.command(cls=SessionCommand)
@session_argument(optional=True)
@click.option("--section", help="Only this section's items (Agents, State, Tools, Guild, Logins, ...).")
@click.option("--agent", "agent_id", help="Only this agent's items.")
@click.option("--page", type=click.IntRange(1), default=1, show_default=True)
@click.option("--page-size", type=click.IntRange(1, 200), default=50, show_default=True)
@json_option
@pass_state
def pending(
    state: State,
    session_id: str | None,
    section: str | None,
    agent_id: str | None,
    page: int,
    page_size: int,
    as_json: bool,
) -> None:
    """The pending items: a session's tray (with SESSION_ID), or across every session of the organisation."""
    if session_id is not None:
        tray = state.api.get(f"/api/studio/sessions/{session_id}/pending")
        if section is not None or agent_id is not None:
            tray["items"] = [
                i
                for i in tray["items"]
                if (section is None or i["section"] == section) and (agent_id is None or i["agent_id"] == agent_id)
            ]
        emit(tray, as_json, show_tray)
        return
    found = state.api.get("/api/studio/pending", section=section, agent_id=agent_id, page=page, page_size=page_size)
    emit(
        found,
        as_json,
        lambda data: show_items(data["items"], f"{plural(data['total'], 'pending request')} (page {data['page']})"),
    )


@cli.command(cls=SessionCommand)
@session_argument()
@click.argument("seq", type=click.IntRange(0))
@json_option
@pass_state
def show(state: State, session_id: str, seq: int, as_json: bool) -> None:
    """One pending request: its card with a coloured diff per field (where its kind has a card), else its item.

    A request decided already shows as it was proposed, with every decision taken on it, the outcome and its reason,
    and what the coach was told (its card, with ``--json``); the command says how it was decided, by whom and when,
    and exits 6. A seq with no open request: 4."""
    item = open_item(state.api, session_id, seq)
    if item is None:
        found = locate(state.api, session_id, seq)
        if found is None or found.card is None:
            raise not_open(session_id, seq)
        if found.card.get("status") != "pending":
            emit({"item": None, "card": found.card}, as_json, lambda data: show_decided(data["card"]))
            raise Failure(ExitCode.REFUSED, decided(session_id, seq, found.card))
        item = open_item(state.api, session_id, seq)  # proposed since the tray was read
        if item is None:
            raise not_open(session_id, seq)
    card = None
    try:
        card = state.api.get(item["decision_path"], check_url=False)
    except ApiError as exc:
        if exc.status not in (404, 405):
            raise
    emit({"item": item, "card": card}, as_json, lambda data: show_card(data["item"], data["card"]))


@cli.command(cls=SessionCommand)
@session_argument()
@json_option
@pass_state
def logins(state: State, session_id: str, as_json: bool) -> None:
    """Every login the session reaches, and whether it holds each (the Logins popover)."""
    found = state.api.get(f"/api/studio/sessions/{session_id}/connections")
    emit(found, as_json, show_logins)


@cli.command()
@click.argument("agent_id")
@json_option
@pass_state
def proposals(state: State, agent_id: str, as_json: bool) -> None:
    """The agent's source proposals: waiting and decided, with their counts."""
    found = state.api.get(f"/api/agents/{agent_id}/proposals")
    emit(found, as_json, show_proposals)


@cli.command()
def codes() -> None:
    """The exit codes, which scripts may rely on."""
    for code in ExitCode:
        click.echo(f"{code.value}  {code.summary}")


# --- decisions ------------------------------------------------------------------------------------------------


def decide_one(
    state: State,
    session_id: str,
    seq: int,
    button: str,
    key: str | None,
    as_json: bool,
    options: dict[str, Any] | None = None,
) -> None:
    """Send ``button``'s decision on the request at ``seq`` with its ``options`` (a login grant's lifetime): where its
    tray item says, or, when it is not open, where :func:`locate` finds it (the API answers a decided one as it
    answers any client)."""
    item = open_item(state.api, session_id, seq)
    if item is not None:
        path, decision, blind = item["decision_path"], item["decisions"][button], False
    else:
        found = locate(state.api, session_id, seq)
        if found is None:
            raise not_open(session_id, seq)
        path, decision, blind = found.path, found.decisions[button], found.card is None
    try:
        outcome = state.api.decide(path, {"decision": decision, **(options or {})}, key)
    except ApiError as exc:
        if blind and exc.status == 404:  # the one endpoint with no read by seq has no request there either
            raise not_open(session_id, seq) from None
        raise
    emit(outcome, as_json, lambda o: out.print(decision_line(seq, o)))


def decision_line(seq: int, answer: dict[str, Any]) -> str:
    """What a decision answered, in one line: its outcome, or (a policy requiring several approvals) that the
    caller's approval was counted and what the request still waits for."""
    if answer.get("status") == "awaiting_approvals":
        return f"seq {seq}: your approval was counted ({escape(str(answer.get('detail', '')))})"
    return f"seq {seq}: {answer.get('outcome')} ({escape(str(answer.get('detail', '')))})"


lifetime_option = click.option(
    "--lifetime",
    metavar="DURATION",
    help="A login grant's lifetime, an ISO 8601 duration (PT30M, PT8H, P1D; at most P30D): the grant lapses after "
    "it. Left out: until the session closes.",
)


@cli.command(cls=SessionCommand)
@session_argument()
@click.argument("seq", type=click.IntRange(0))
@lifetime_option
@key_option
@json_option
@pass_state
def apply(state: State, session_id: str, seq: int, lifetime: str | None, key: str | None, as_json: bool) -> None:
    """Apply one request with its kind's apply decision (Apply edit, Grant read access, Publish, ...); a login
    request's grant may take a ``--lifetime``."""
    decide_one(state, session_id, seq, "apply", key, as_json, None if lifetime is None else {"lifetime": lifetime})


@cli.command(cls=SessionCommand)
@session_argument()
@click.argument("seq", type=click.IntRange(0))
@key_option
@json_option
@pass_state
def decline(state: State, session_id: str, seq: int, key: str | None, as_json: bool) -> None:
    """Decline one request with its kind's decline decision (Decline, Discard)."""
    decide_one(state, session_id, seq, "decline", key, as_json)


@cli.command(cls=SessionCommand)
@session_argument()
@click.argument("seq", type=click.IntRange(0))
@key_option
@json_option
@pass_state
def revert(state: State, session_id: str, seq: int, key: str | None, as_json: bool) -> None:
    """Propose the inverse of an applied request as a new request (bound to its target as it is now), in a session
    opened for you; it is decided as any other. Prints where the new request is. Sent with an ``Idempotency-Key``,
    as a decision is: a retried command files one request."""
    found = locate(state.api, session_id, seq)
    if found is None:
        raise not_open(session_id, seq)
    filed = state.api.decide(f"{found.path}/revert", None, key)
    emit(filed, as_json, lambda f: out.print(reverted_line(session_id, seq, f)))


def reverted_line(session_id: str, seq: int, filed: dict[str, Any]) -> str:
    """Where the revert of request ``seq`` went: the new request's session and seq, and how to decide it."""
    new_session, new_seq = filed["session_id"], filed["seq"]
    return (
        f"seq {seq} of session {escape(session_id)}: its revert is request {new_seq} of session {escape(new_session)} "
        f"(pending; `assent show {escape(new_session)} {new_seq}`, `assent apply {escape(new_session)} {new_seq}`)"
    )


def all_of(state: State, session_id: str, what: str, key: str | None, as_json: bool, dry_run: bool, yes: bool) -> None:
    """Preview (``--dry-run``), or confirm then send, Apply all or Decline all (``what``)."""
    path = f"/api/studio/sessions/{session_id}/{what}"
    if dry_run:
        emit(state.api.request("GET", path), as_json, show_all)
        return
    if not yes:
        if not sys.stdin.isatty():
            err.print(f"{what} decides every open request of the session: pass --yes to confirm it without a terminal")
            raise click.exceptions.Exit(ExitCode.USAGE)
        plan = state.api.request("GET", path)
        show_all(plan)
        if not click.confirm(f"{what.replace('-', ' ').capitalize()} now?", default=False):
            out.print("Nothing changed.")
            return
    done = state.api.decide(path, None, key)
    emit(done, as_json, show_all)
    stopped = done.get("stopped")
    if stopped is not None:
        raise click.exceptions.Exit(exit_code(int(stopped["status"])) or ExitCode.FAILED)


dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Print what it would do to each request (apply, or leave and why); change nothing."
)
yes_option = click.option(
    "--yes", is_flag=True, help="Do it without asking (needed where there is no terminal to ask on)."
)


@cli.command("apply-all", cls=SessionCommand)
@session_argument()
@key_option
@json_option
@dry_run_option
@yes_option
@pass_state
def apply_all(state: State, session_id: str, key: str | None, as_json: bool, dry_run: bool, yes: bool) -> None:
    """Apply the session's open requests in turn; never a login grant nor a change that widens access. A refused
    apply (a stale one) stops the rest: the exit code is its own (5 for stale). Shows the plan and asks first,
    unless ``--yes``; ``--dry-run`` only shows it."""
    all_of(state, session_id, "apply-all", key, as_json, dry_run, yes)


@cli.command("decline-all", cls=SessionCommand)
@session_argument()
@key_option
@json_option
@dry_run_option
@yes_option
@pass_state
def decline_all(state: State, session_id: str, key: str | None, as_json: bool, dry_run: bool, yes: bool) -> None:
    """Decline every open request of the session (a draft discarded, a login declined). Shows the plan and asks
    first, unless ``--yes``; ``--dry-run`` only shows it."""
    all_of(state, session_id, "decline-all", key, as_json, dry_run, yes)


@cli.command("continue", cls=SessionCommand)
@session_argument()
@json_option
@pass_state
def continue_(state: State, session_id: str, as_json: bool) -> None:
    """Send the paused turn's continuation again (409 while it still waits on decisions)."""
    sent = state.api.request("POST", f"/api/studio/sessions/{session_id}/continue")
    emit(sent, as_json, lambda s: out.print(f"sent again ({plural(s['sends'], 'send')})\n{escape(s['text'])}"))


def set_grant(
    state: State, session_id: str, login_id: str, granted: bool, as_json: bool, lifetime: str | None = None
) -> None:
    body: dict[str, Any] = {"granted": granted, **({"lifetime": lifetime} if lifetime is not None else {})}
    found = state.api.request("PUT", f"/api/studio/sessions/{session_id}/connections/{login_id}", json=body)
    done = "revoked" if not granted else "granted" + ("" if lifetime is None else f" for {lifetime}")
    emit(found, as_json, lambda s: out.print(f"{login_id}: {done}"))


@cli.command(cls=SessionCommand)
@session_argument()
@click.argument("login_id")
@lifetime_option
@json_option
@pass_state
def grant(state: State, session_id: str, login_id: str, lifetime: str | None, as_json: bool) -> None:
    """Grant the session read access to a login (it also answers a waiting request for it), until the session closes
    or for ``--lifetime`` (PT1H)."""
    set_grant(state, session_id, login_id, True, as_json, lifetime)


@cli.command(cls=SessionCommand)
@session_argument()
@click.argument("login_id")
@json_option
@pass_state
def revoke(state: State, session_id: str, login_id: str, as_json: bool) -> None:
    """Revoke the session's read access to a login."""
    set_grant(state, session_id, login_id, False, as_json)


@cli.command()
@click.argument("agent_id")
@click.argument("proposal_id")
@click.option("--new-branch", help="Commit onto a new branch of this name (no deploy).")
@click.option("--branch", "existing", help="Commit onto this existing branch (no deploy).")
@click.option("--message", help="The commit message (the proposal's reason by default).")
@key_option
@json_option
@pass_state
def approve(
    state: State,
    agent_id: str,
    proposal_id: str,
    new_branch: str | None,
    existing: str | None,
    message: str | None,
    key: str | None,
    as_json: bool,
) -> None:
    """Approve a source proposal: commit onto the production branch and deploy, or onto a branch."""
    if new_branch and existing:
        raise click.UsageError("--new-branch and --branch go one at a time")
    body: dict[str, Any] = {"decision": "approve"}
    if new_branch:
        body["branch"] = {"kind": "new", "name": new_branch}
    elif existing:
        body["branch"] = {"kind": "existing", "name": existing}
    if message:
        body["message"] = message
    outcome = state.api.decide(f"/api/agents/{agent_id}/proposals/{proposal_id}", body, key)
    emit(outcome, as_json, lambda o: out.print(f"{proposal_id}: {o.get('outcome')} ({escape(o.get('detail', ''))})"))


@cli.command()
@click.argument("agent_id")
@click.argument("proposal_id")
@key_option
@json_option
@pass_state
def discard(state: State, agent_id: str, proposal_id: str, key: str | None, as_json: bool) -> None:
    """Discard a source proposal."""
    outcome = state.api.decide(f"/api/agents/{agent_id}/proposals/{proposal_id}", {"decision": "discard"}, key)
    emit(outcome, as_json, lambda o: out.print(f"{proposal_id}: {o.get('outcome')} ({escape(o.get('detail', ''))})"))


# --- what people read -----------------------------------------------------------------------------------------


def open_item(api: Api, session_id: str, seq: int) -> dict[str, Any] | None:
    """The open request at ``seq`` of the session, as its tray shows it (None when it is not open; 404 when there
    is no such session)."""
    tray = api.get(f"/api/studio/sessions/{session_id}/pending")
    for item in tray["items"]:
        if item["seq"] == seq:
            return dict(item)
    return None


@dataclass(frozen=True)
class Located:
    """Where a request that is not open is decided: ``path``, the words of its buttons (``apply``, ``decline``),
    and its card as the endpoint's read by seq tells it (None: the endpoint has no such read)."""

    path: str
    decisions: dict[str, str]
    card: dict[str, Any] | None


def locate(api: Api, session_id: str, seq: int) -> Located | None:
    """The request at ``seq`` among the session's decision endpoints (the kind registry's, ``/console/kinds.json``):
    the first whose read by seq (``GET …/{endpoint}/{seq}``) knows it; else, when exactly one endpoint has no such
    read (its route takes a decision only), that one, where the API tells whether it holds the request; else None.
    An endpoint decided elsewhere (the Proposals page's, by agent and proposal) has no route here: its 404 is
    passed over."""
    kinds = api.kinds()
    words: dict[str, dict[str, str]] = {}
    for spec in kinds.values():
        words.setdefault(spec["endpoint"], {"apply": spec["apply"], "decline": spec["decline"]})
    blind: list[Located] = []
    for endpoint, decisions in words.items():
        path = f"/api/studio/sessions/{session_id}/{endpoint}/{seq}"
        try:
            card = api.get(path, check_url=False)
        except ApiError as exc:
            if exc.status == 405:
                blind.append(Located(path, decisions, None))
            elif exc.status != 404:
                raise
            continue
        spec = kinds.get(card.get("kind", ""))
        return Located(path, {"apply": spec["apply"], "decline": spec["decline"]} if spec else decisions, card)
    return blind[0] if len(blind) == 1 else None


def not_open(session_id: str, seq: int) -> Failure:
    return Failure(
        ExitCode.NOT_FOUND,
        f"session {session_id} has no open request at seq {seq}: `assent pending {session_id}` lists the open ones",
    )


def decided(session_id: str, seq: int, card: dict[str, Any]) -> str:
    """How the request of ``card`` was decided, by whom and when, as far as its card tells (an edit's card has a
    ``resolution``; a Task draft's card its status and who published or discarded it)."""
    status, by, at = resolved(card)
    when = f" at {moment(at)}" if at else ""
    label = (card.get("target") or {}).get("label")
    return (
        f"seq {seq} of session {session_id}{f' ({label})' if label else ''} is no longer open: it was {status}"
        f"{f' by {by}' if by else ''}{when}"
    )


def resolved(card: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """How the request of ``card`` was resolved, by whom and when (an edit's card has a ``resolution``; a Task
    draft's card its status and who published or discarded it, and no time)."""
    resolution = card.get("resolution") or {}
    status = resolution.get("status") or card.get("status") or "decided"
    return status, resolution.get("resolved_by") or card.get(f"{status}_by_user_id"), resolution.get("resolved_at")


def moment(at: Any) -> str:
    """A time of the API's, in UTC to the second (as it came, where it is not one)."""
    try:
        when = datetime.fromisoformat(str(at))
    except ValueError:
        return str(at)
    when = when.astimezone(UTC) if when.tzinfo else when
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"


def row(table: Table, *cells: Any) -> None:
    """A table row of plain text (what the API says is never read as markup)."""
    table.add_row(*(Text(str(cell)) for cell in cells))


def session_names(s: dict[str, Any]) -> str:
    """How people name a session: its agents and its coach ("ada, bob · Support coach"); empty when it names none."""
    coach = (s.get("coach") or {}).get("name")
    return " · ".join(part for part in (", ".join(s.get("agents") or []), coach) if part)


def show_sessions(found: dict[str, Any]) -> None:
    """The sessions as a table whose ids are never cut (a cut id cannot be copied): the other columns wrap."""
    table = Table(title=f"{plural(found['total'], 'session')} (page {found['page']})")
    width = max((len(s["session_id"]) for s in found["items"]), default=7)
    table.add_column("session", no_wrap=True, min_width=width, overflow="fold")
    for column in ("names and about", "state", "operator · guild", "opened"):
        table.add_column(column, overflow="fold")
    for s in found["items"]:
        names = "\n".join(part for part in (session_names(s), s.get("about") or "") if part)
        row(
            table,
            s["session_id"],
            names,
            f"{s['state']}, {s['waiting_on']} waiting",
            f"{s['operator_id']} · {s['source_guild_id']}",
            moment(s["opened_at"]),
        )
    out.print(table)


def show_tray(tray: dict[str, Any]) -> None:
    names = tray.get("names") or {}
    named = " · ".join(part for part in (tray["session_id"], session_names(names), names.get("about") or "") if part)
    out.print(Text(named))
    counts = "  ".join(f"{section} {n}" for section, n in tray["sections"].items())
    out.print(f"[bold]{tray['summary']}[/bold]  {counts}")
    show_items(tray["items"], None)


def show_items(items: list[dict[str, Any]], title: str | None) -> None:
    table = Table(title=title)
    for column in ("session", "seq", "section", "kind", "target", "apply", "decline", "note"):
        table.add_column(column)
    for item in items:
        notes = [word for word, on in (("stale", item["stale"]), ("on its own", item["decided_alone"])) if on]
        notes += [str(item[field]) for field in ("waiting_for",) if item.get(field)]
        if item.get("escalated_by"):
            notes.append("escalated")
        if item.get("expires_at"):
            notes.append(f"expires {moment(item['expires_at'])}")
        row(
            table,
            item["session_id"],
            str(item["seq"]),
            item["section"],
            item["kind"],
            item["target"].get("label", ""),
            item["apply_label"],
            item["decline_label"],
            ", ".join(notes),
        )
    out.print(table)


def diff_text(diff: str) -> Text:
    """A unified diff with added lines green, removed red, hunks cyan."""
    text = Text()
    for line in diff.splitlines():
        style = (
            "bold"
            if line.startswith(("+++", "---"))
            else "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "cyan"
            if line.startswith("@@")
            else ""
        )
        text.append(line + "\n", style=style)
    return text


def show_card(item: dict[str, Any], card: dict[str, Any] | None) -> None:
    stale = " [red](stale)[/red]" if item["stale"] else ""
    label = escape(item["target"].get("label", ""))
    out.print(f"[bold]seq {item['seq']}[/bold] {item['kind']} {item['action']}: {label}{stale}")
    out.print(f"reason: {escape(item['reason'])}")
    apply, decline = escape(item["apply_label"]), escape(item["decline_label"])
    out.print(f"buttons: {apply} ({item['decisions']['apply']}) / {decline} ({item['decisions']['decline']})")
    if card is None:
        return
    fields = card.get("fields") or [{"name": "", "diff": card.get("diff", "")}]
    for field in fields:
        if field.get("name"):
            out.print(f"[bold]{escape(field['name'])}[/bold]")
        out.print(diff_text(field["diff"]))
    for line in [*card.get("notes", []), *card.get("effects", [])]:
        out.print(f"• {escape(line)}")


def show_decided(card: dict[str, Any]) -> None:
    """A request that is no longer open: its card as proposed, every decision taken on it (its outcome and the
    owner's reason), the outcome, and what the coach was told, as far as its card tells."""
    label = escape((card.get("target") or {}).get("label", ""))
    what = " ".join(part for part in (card.get("kind"), card.get("action")) if part)
    out.print(f"[bold]seq {card.get('seq', '')}[/bold] {escape(what)}{': ' + label if label else ''}")
    reason = card.get("reason") or card.get("rationale")
    if reason:
        out.print(f"reason: {escape(reason)}")
    fields = [f for f in card.get("fields") or [] if f.get("diff")] or [{"name": "", "diff": card.get("diff", "")}]
    for field in fields:
        if field.get("name"):
            out.print(f"[bold]{escape(field['name'])}[/bold] (as proposed)")
        out.print(diff_text(field["diff"]))
    resolution = card.get("resolution") or {}
    taken = resolution.get("decisions") or []
    if taken:
        out.print("decisions:")
    for d in taken:
        said = f" — {d['detail']}" if d.get("detail") else ""
        outcome = d.get("outcome") or "no outcome yet"
        out.print(Text(f"  {moment(d['decided_at'])}  {d['decision']} by {d['actor']} ({d['via']}): {outcome}{said}"))
    status, by, at = resolved(card)
    why = f" — {resolution['detail']}" if resolution.get("detail") else ""
    out.print(Text(f"outcome: {status}{f' by {by}' if by else ''}{f' at {moment(at)}' if at else ''}{why}"))
    told = resolution.get("told")
    if told:
        out.print(Text(f"the coach was told (at {moment(told['continued_at'])}):"))
        for line in str(told["text"]).splitlines():
            out.print(Text(f"  {line}"))
    elif "told" in resolution:
        out.print("the coach was told nothing yet: its turn waits on other requests")


def show_all(done: dict[str, Any]) -> None:
    for r in done["resolved"]:
        out.print(f"seq {r['seq']}: {r['outcome']}")
    for s in done["skipped"]:
        out.print(f"seq {s['seq']}: left — {escape(s['reason'])}")
    if done["stopped"] is not None:
        s = done["stopped"]
        out.print(f"[red]seq {s['seq']}: stopped ({s['status']}) — {escape(s['detail'])}[/red]")
    out.print(escape(done["message"]))


def grant_ends(connection: dict[str, Any]) -> str:
    """Until when a granted login is held (``expires_at``), or that its grant lapsed; empty for no lifetime."""
    expires_at = connection.get("expires_at")
    if expires_at is None or connection.get("revoked_at") is not None:
        return ""
    when = datetime.fromisoformat(expires_at).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"until {when}" if connection["granted"] else f"lapsed {when}"


def show_logins(found: dict[str, Any]) -> None:
    table = Table(title=f"logins of {found['session_id']}" + (" (closed)" if found.get("closed") else ""))
    for column in ("login", "name", "scope", "account", "connected", "granted", "expires"):
        table.add_column(column)
    for c in found["connections"]:
        row(
            table,
            c["connection_id"],
            c["name"],
            c["scope"],
            c["account"],
            str(c["connected"]),
            str(c["granted"]),
            grant_ends(c),
        )
    out.print(table)


def show_proposals(page: dict[str, Any]) -> None:
    counts = page["counts"]
    for title, rows in (("Waiting", page["waiting"]), ("Decided", page["decided"])):
        table = Table(title=f"{title} ({counts[title.lower()]})")
        for column in ("proposal", "status", "label", "files", "reason"):
            table.add_column(column)
        for p in rows:
            row(table, p["proposal_id"], p["status"], p["label"], str(len(p["files"])), p["reason"])
        out.print(table)


# --- history and audit -------------------------------------------------------------------------------------------

HISTORY_FILTERS = (
    ("--agent", "agent", "Only this agent's entries."),
    ("--guild", "guild", "Only this guild's entries."),
    ("--kind", "kind", "Only entries of this kind (memory, note, login, source, ...)."),
    ("--actor", "actor", "Only entries by this actor (a person, a rule, a service, coach)."),
    ("--outcome", "outcome", "Only outcomes that are this (applied, declined, stale, refused, superseded, ...)."),
    ("--session", "session", "Only this session's entries."),
)


def history_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """The filters ``history`` and its export share."""
    for flag, name, text in reversed(HISTORY_FILTERS):
        command = click.option(flag, name, help=text)(command)
    command = click.option(
        "--type",
        "type_",
        type=click.Choice(["proposed", "decided", "approved", "outcome", "continued", "written"]),
        help="Only entries of this type.",
    )(command)
    command = click.option(
        "--since", help="Entries at or after this time (RFC 3339 with its zone, e.g. 2026-12-01T00:00:00Z)."
    )(command)
    return click.option("--until", help="Entries before this time (RFC 3339 with its zone).")(command)


def history_params(**given: Any) -> dict[str, Any]:
    renamed = {"type_": "type"}
    return {renamed.get(k, k): v for k, v in given.items() if v is not None}


@cli.command()
@history_filters
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True, help="Entries per page.")
@click.option("--cursor", help="Go on from a page's next cursor.")
@click.option("--all", "every", is_flag=True, help="Every page, not only the first.")
@click.option("--export", "export", type=click.Choice(["jsonl", "csv"]), help="Print every entry, oldest first.")
@json_option
@pass_state
def history(
    state: State, /, limit: int, cursor: str | None, every: bool, export: str | None, as_json: bool, **filters: Any
) -> None:
    """The organisation's history, newest first: every proposal, decision, outcome, continuation and direct write,
    with who, when, the session and seq, and the target. ``--export`` prints the entries as JSON Lines or CSV."""
    params = history_params(**filters)
    if export is not None:
        click.echo(state.api.request("GET", "/api/history/export", params={**params, "format": export}), nl=False)
        return
    page = state.api.get("/api/history", limit=limit, cursor=cursor, **params)
    entries = list(page["entries"])
    while every and page["next_cursor"] is not None:
        page = state.api.get("/api/history", limit=limit, cursor=page["next_cursor"], **params)
        entries += page["entries"]
    found = {"entries": entries, "next_cursor": page["next_cursor"]}
    emit(found, as_json, show_history)


def show_history(page: dict[str, Any]) -> None:
    table = Table(title=f"history ({plural(len(page['entries']), 'entry', 'entries')})")
    for column in ("#", "when", "what", "actor", "kind", "target", "session:seq", "detail"):
        table.add_column(column)
    for e in page["entries"]:
        what = e["type"] if e["type"] not in ("decided", "outcome") else f"{e['type']}: {e['decision'] or e['outcome']}"
        if e["type"] == "outcome" and e["outcome"]:
            what = e["outcome"]
        where = f"{e['session_id']}:{e['seq']}" if e["seq"] is not None else e["session_id"] or ""
        row(
            table,
            str(e["position"]),
            e["at"],
            what,
            e["actor"],
            e["kind"] or "",
            e["target"] or "",
            where,
            e["detail"] or "",
        )
    out.print(table)
    if page["next_cursor"]:
        out.print(f"more: --cursor {page['next_cursor']}")


@cli.group()
def audit() -> None:
    """The audit log: check that the history was not edited."""


@audit.command()
@click.option("--first", type=click.IntRange(0), help="The first position checked (default: the oldest kept).")
@click.option("--last", type=click.IntRange(0), help="The last position checked (default: the newest).")
@json_option
@pass_state
def verify(state: State, first: int | None, last: int | None, as_json: bool) -> None:
    """Check the organisation's hash chain: every entry matches its hash and names the one before it, and none is
    missing; the kept chain goes on from the newest pruned checkpoint, and the newest signed checkpoint in the range
    holds. Exits 0 when the range holds, 8 naming the first entry that does not fit."""
    found = state.api.get("/api/history/verify", first=first, last=last)
    emit(found, as_json, show_verified)
    if not found["ok"]:
        raise click.exceptions.Exit(ExitCode.BROKEN)


def show_verified(found: dict[str, Any]) -> None:
    span = f"entries {found['first']} to {found['last']}" if found["last"] >= found["first"] else "no entries"
    if found["ok"]:
        out.print(f"ok: {span} of {found['org_id']} hold ({plural(found['checked'], 'entry', 'entries')} checked)")
    else:
        b = found["first_break"]
        out.print(f"[red]broken at entry {b['position']}[/red] ({b['reason']}): {escape(b['detail'])}")
        out.print(f"{plural(found['checked'], 'entry', 'entries')} before it fit")
    if found["head"]:
        out.print(f"head: {found['head']}")
    if found["kept_from"]:
        out.print(f"kept from entry {found['kept_from']} (the entries before it were pruned)")
    for c in found["checkpoints"]:
        said = "holds" if c["ok"] else f"[red]does not hold[/red]: {escape(c['detail'] or '')}"
        out.print(f"{c['kind']} checkpoint of entry {c['position']}, signed {c['at']} with key {c['key_id']}: {said}")
    if found["checkpoints_checked"]:
        out.print(f"{plural(found['checkpoints_checked'], 'signed checkpoint')} checked")
    if found["signing_key_id"] is None:
        out.print("no checkpoints are signed: the gateway has no signing key (ASSENT_HISTORY_SIGNING_KEY)")
    elif not found["checkpoints_checked"]:
        out.print("no signed checkpoint in this range yet")
    if found["unlinked"]:
        out.print(
            f"{plural(found['unlinked'], 'entry', 'entries')} wait to be linked (since {found['oldest_unlinked_at']})"
        )


@audit.command("checkpoints")
@click.option("--kind", type=click.Choice(["head", "pruned"]), help="Only checkpoints of this kind.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True, help="Checkpoints per page.")
@click.option("--cursor", help="Go on from a page's next cursor.")
@click.option("--all", "every", is_flag=True, help="Every page, not only the first.")
@json_option
@pass_state
def checkpoints(state: State, kind: str | None, limit: int, cursor: str | None, every: bool, as_json: bool) -> None:
    """The organisation's signed checkpoints, newest first: each says, under the deployment's key, that the entry at
    its position had its hash when signed (head: the chain's head; pruned: the last entry a prune removed). Keep a
    copy outside Assent (``--all --json``): with an export and the public keys it proves the history."""
    page = state.api.get("/api/history/checkpoints", kind=kind, limit=limit, cursor=cursor)
    found = list(page["checkpoints"])
    while every and page["next_cursor"] is not None:
        page = state.api.get("/api/history/checkpoints", kind=kind, limit=limit, cursor=page["next_cursor"])
        found += page["checkpoints"]
    emit({"checkpoints": found, "next_cursor": page["next_cursor"]}, as_json, show_checkpoints)


def show_checkpoints(page: dict[str, Any]) -> None:
    table = Table(title=f"checkpoints ({plural(len(page['checkpoints']), 'checkpoint')})")
    for column in ("kind", "entry", "hash", "signed", "key"):
        table.add_column(column)
    for c in page["checkpoints"]:
        row(table, c["kind"], str(c["position"]), c["hash"], c["at"], c["key_id"])
    out.print(table)
    if page["next_cursor"]:
        out.print(f"more: --cursor {page['next_cursor']}")


@audit.command("keys")
@json_option
@pass_state
def audit_keys(state: State, as_json: bool) -> None:
    """The public keys that verify the checkpoints (Ed25519, 32 raw bytes in base64): the one that signs now and the
    retired ones. Compare them with a copy kept outside Assent before trusting them."""
    found = state.api.get("/api/history/keys")
    emit(found, as_json, show_keys)


def show_keys(found: dict[str, Any]) -> None:
    table = Table(title="keys that verify the history's checkpoints")
    for column in ("key", "status", "public key (Ed25519, base64)"):
        table.add_column(column)
    for k in found["keys"]:
        row(table, k["key_id"], k["status"], k["public_key"])
    out.print(table)
    if found["signing_key_id"] is None:
        out.print("no key signs: the gateway has no ASSENT_HISTORY_SIGNING_KEY")


# --- policy ------------------------------------------------------------------------------------------------------


def read_policy_file(path: str) -> Any:
    """A policy document from a YAML or JSON file (JSON is YAML)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as file:
            return yaml.safe_load(file)
    except OSError as exc:
        raise Failure(ExitCode.USAGE, f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise Failure(ExitCode.USAGE, f"{path} is neither YAML nor JSON: {exc}") from None


@cli.group()
def policy() -> None:
    """The organisation's policy: rules that decide, require approvals, expire, notify and escalate."""


@policy.command("show")
@click.option("--version", "version", type=click.IntRange(1), help="A past version (default: the one in force).")
@json_option
@pass_state
def policy_show(state: State, version: int | None, as_json: bool) -> None:
    """The policy in force (or a past version): its rules in the order they are read."""
    found = state.api.get("/api/policy" if version is None else f"/api/policy/versions/{version}")
    emit(found, as_json, show_policy)


@policy.command("versions")
@json_option
@pass_state
def policy_versions(state: State, as_json: bool) -> None:
    """The policy's versions, newest first: who set each and when."""
    found = state.api.get("/api/policy/versions")
    emit(found, as_json, show_policy_versions)


@policy.command("set")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--expected-version", type=click.IntRange(0), help="The version it replaces (default: the one in force).")
@json_option
@pass_state
def policy_set(state: State, path: str, expected_version: int | None, as_json: bool) -> None:
    """Set the policy from a YAML or JSON file (an admin). It replaces the version in force, or, with
    ``--expected-version``, that version only: if someone changed the policy since, nothing is written (exit 5)."""
    document = read_policy_file(path)
    if expected_version is None:
        expected_version = state.api.get("/api/policy")["version"]
    found = state.api.request("PUT", "/api/policy", json={"policy": document, "expected_version": expected_version})
    emit(
        found,
        as_json,
        lambda v: out.print(f"policy version {v['version']} set: {plural(len(v['policy']['rules']), 'rule')}"),
    )


@policy.command("test")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--last", type=click.IntRange(1, 10_000), default=100, show_default=True, help="How many past proposals.")
@json_option
@pass_state
def policy_test(state: State, path: str, last: int, as_json: bool) -> None:
    """Try a policy from a file over the organisation's last proposals: what it would have decided, required, expired
    and escalated, beside what people did. Nothing is changed."""
    found = state.api.request("POST", "/api/policy/test", json={"policy": read_policy_file(path), "last": last})
    emit(found, as_json, show_trial)


# --- webhooks ----------------------------------------------------------------------------------------------------

EVENTS = ("proposed", "decided", "expired", "escalated")


@cli.group()
def webhook() -> None:
    """The organisation's webhooks (an admin's): told of requests proposed, decided, expired and escalated."""


@webhook.command("add")
@click.argument("name")
@click.argument("url")
@click.option(
    "--event", "events", type=click.Choice(EVENTS), multiple=True, help="An event it is told of (default: every one)."
)
@click.option("--format", "fmt", type=click.Choice(("json", "slack")), default="json", show_default=True)
@json_option
@pass_state
def webhook_add(state: State, name: str, url: str, events: tuple[str, ...], fmt: str, as_json: bool) -> None:
    """Make a webhook: NAME (the one policy rules use) posts to URL. Its secret is printed this once: keep it, to check
    each delivery's Assent-Signature."""
    body: dict[str, Any] = {"name": name, "url": url, "format": fmt}
    if events:
        body["events"] = list(events)
    found = state.api.request("POST", "/api/notifications/webhooks", json=body)
    emit(
        found,
        as_json,
        lambda w: out.print(
            f"webhook {escape(w['name'])} made: {', '.join(w['events'])} to {escape(w['url'])}\n"
            f"secret (shown once): {w['secret']}"
        ),
    )


@webhook.command("list")
@json_option
@pass_state
def webhook_list(state: State, as_json: bool) -> None:
    """The organisation's webhooks."""
    found = state.api.get("/api/notifications/webhooks")
    emit(found, as_json, show_webhooks)


@webhook.command("remove")
@click.argument("name")
@json_option
@pass_state
def webhook_remove(state: State, name: str, as_json: bool) -> None:
    """Remove a webhook and its deliveries: nothing more is sent to it."""
    found = state.api.request("DELETE", f"/api/notifications/webhooks/{quote(name, safe='')}")
    emit(found, as_json, lambda w: out.print(f"webhook {escape(w['name'])} removed"))


@webhook.command("deliveries")
@click.argument("name", required=False)
@click.option("--status", type=click.Choice(("pending", "delivered", "dead")), help="Only these (dead: to replay).")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@json_option
@pass_state
def webhook_deliveries(state: State, name: str | None, status: str | None, limit: int, as_json: bool) -> None:
    """The deliveries of one webhook (NAME) or all, newest first."""
    path = (
        "/api/notifications/deliveries"
        if name is None
        else f"/api/notifications/webhooks/{quote(name, safe='')}/deliveries"
    )
    params: dict[str, Any] = {"limit": limit}
    if status is not None:
        params["status"] = status
    found = state.api.get(path, **params)
    emit(found, as_json, show_deliveries)


@webhook.command("replay")
@click.argument("delivery_id")
@json_option
@pass_state
def webhook_replay(state: State, delivery_id: str, as_json: bool) -> None:
    """Send a dead delivery again."""
    found = state.api.request("POST", f"/api/notifications/deliveries/{quote(delivery_id, safe='')}/replay")
    emit(found, as_json, lambda d: out.print(f"delivery {d['delivery_id']} is pending again"))


def show_webhooks(found: dict[str, Any]) -> None:
    table = Table(title="webhooks")
    for column in ("name", "url", "events", "format", "made by", "at"):
        table.add_column(column)
    for w in found["webhooks"]:
        row(table, w["name"], w["url"], ", ".join(w["events"]), w["format"], w["created_by"], moment(w["created_at"]))
    out.print(table)


def show_deliveries(found: dict[str, Any]) -> None:
    table = Table(title=f"deliveries ({len(found['deliveries'])})")
    for column in ("id", "webhook", "event", "status", "attempts", "last answer", "made"):
        table.add_column(column)
    for d in found["deliveries"]:
        last = d["last_error"] or ("" if d["last_status"] is None else str(d["last_status"]))
        row(
            table,
            d["delivery_id"],
            d["webhook"],
            d["event"],
            d["status"],
            str(d["attempts"]),
            last,
            moment(d["created_at"]),
        )
    out.print(table)


def show_policy(found: dict[str, Any]) -> None:
    if found["version"] == 0:
        out.print("no policy is set: every request waits for one person's decision")
        return
    out.print(f"policy version {found['version']}, set by {found['set_by']} at {moment(found['set_at'])}")
    table = Table()
    for column in ("#", "rule", "matches", "effect"):
        table.add_column(column)
    for n, rule in enumerate(found["policy"]["rules"], start=1):
        match = ", ".join(f"{k}={v}" for k, v in (rule.get("match") or {}).items() if v is not None) or "every request"
        effect = next(
            f"{k}: {v}"
            for k in ("decide", "require", "expire_after", "notify", "escalate")
            if (v := rule.get(k)) is not None
        )
        row(table, str(n), rule["name"], match, effect)
    out.print(table)


def show_policy_versions(found: dict[str, Any]) -> None:
    table = Table(title="policy versions")
    for column in ("version", "set by", "at", "rules", "hash"):
        table.add_column(column)
    for v in found["versions"]:
        row(table, str(v["version"]), v["set_by"], moment(v["set_at"]), str(len(v["policy"]["rules"])), v["hash"][:12])
    out.print(table)


def show_trial(found: dict[str, Any]) -> None:
    s = found["summary"]
    out.print(
        f"replayed {plural(s['replayed'], 'proposal')}: the rules would have applied {s['applied']} and declined "
        f"{s['declined']} ({s['differ']} otherwise than people did), required several approvals for "
        f"{s['approvals_required']}, expired {s['expired']}, escalated {s['escalated']}, "
        f"told webhooks of {s['notified']}"
    )
    table = Table()
    for column in ("session:seq", "kind", "target", "people", "the policy"):
        table.add_column(column)
    for p in found["proposals"]:
        said = []
        if p["decided"]:
            said.append(f"{p['decided']} ({p['decided_by']})" + (" — differs" if p["differs"] else ""))
        if p["approvals"]:
            said.append(f"{p['approvals']} approvals ({p['required_by']})")
        if p["expired_by"]:
            said.append(f"expired ({p['expired_by']})")
        if p["escalated_by"]:
            said.append(f"escalated ({p['escalated_by']})")
        if p["notified"]:
            said.append("tells " + ", ".join(p["notified"]))
        people = p["status"] + (f" by {p['resolved_by']}" if p["resolved_by"] else "")
        row(
            table,
            f"{p['session_id']}:{p['seq']}",
            p["kind"],
            p["target"],
            people,
            "; ".join(said) or "waits for a person",
        )
    out.print(table)
