"""``assent`` against the real services: a read with ``--json``, show's diff, apply, apply-all, the exit code of a
stale apply (and of a stale request stopping Apply all), of a missing session, a bad token and no gateway; the config
file and the environment. What a new user meets first: a decision on a request decided already (the API's refusal),
``show`` of one (how it was decided, and what became of it), ``revert`` of an applied one and of a declined one, a URL without a scheme or with a path, no token or a refused one (each says what
to do), counts in the singular; the table of exit codes. The installed command runs as a process for a read, the
stale apply and a few first errors; the rest run in this process (Click's runner, in a thread), which costs no
interpreter start each."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from assent_cli.client import exit_code
from assent_cli.config import DEFAULT_URL, BadUrl, ConfigError, load
from assent_cli.exit_codes import ExitCode
from assent_cli.main import cli, plural
from tests.conftest import OPERATOR, Stack, new_world
from tests.test_connections import create_login, ids, open_session
from tests.test_memory_edits import memory, open_turn, propose, wait_pending
from tests.test_task_drafts import draft, read_task

OK, FAILED, USAGE, AUTH = ExitCode.OK, ExitCode.FAILED, ExitCode.USAGE, ExitCode.AUTH
NOT_FOUND, CONFLICT, REFUSED, UNAVAILABLE = (
    ExitCode.NOT_FOUND,
    ExitCode.CONFLICT,
    ExitCode.REFUSED,
    ExitCode.UNAVAILABLE,
)

ASSENT = Path(sys.executable).parent / "assent"
"""The command as ``make install`` installs it."""


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


ISOLATED = {
    "XDG_CONFIG_HOME": "/nonexistent",
    "NO_COLOR": "1",
    "ASSENT_URL": "",
    "ASSENT_TOKEN": "",
    "ASSENT_CONFIG": "",
}
"""No config file of the machine's, and nothing from the environment but what a test gives."""


async def installed(*args: str, env: dict[str, str]) -> Ran:
    """Run the installed ``assent`` as a process with ``env``."""
    process = await asyncio.create_subprocess_exec(
        str(ASSENT),
        *args,
        env={"PATH": os.environ.get("PATH", ""), **{k: v for k, v in ISOLATED.items() if v}, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(), err.decode())


async def assent(*args: str, env: dict[str, str]) -> Ran:
    """Run ``assent`` in this process (Click's runner, in a thread: the event loop keeps serving the coach)."""
    result = await asyncio.to_thread(CliRunner().invoke, cli, list(args), env={**ISOLATED, **env})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


@pytest.mark.integration
async def test_the_command_reads_shows_applies_and_says_stale_with_its_exit_code(stack: Stack, tmp_path: Path) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": http.headers["Authorization"].removeprefix("Bearer ")}
        ada, bo = await memory(http, world.agent_id), await memory(http, world.other_agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        calls = [
            await propose(turn, world.agent_id, "Prefer short answers.\nQuote the order.\n", ada["version"]),
            await propose(turn, world.other_agent_id, "Bo's.\n", bo["version"]),
            await turn.call(
                "studio_edit_note",
                {"action": "create", "level": "guild", "key": "cli.md", "content": "# CLI\n", "reason": "r"},
            ),
        ]
        assert all(c.ok for c in calls), [c.error for c in calls]
        await turn.end_step()
        first, second, third = (turn.calls[c.tool_call_id].seq for c in calls)
        await wait_pending(http, sid, 3)

        listed = await installed("sessions", "--json", env=env)
        assert listed.code == OK, listed.err
        assert [(s["session_id"], s["waiting_on"]) for s in listed.json()["items"]] == [(sid, 3)]
        tray = await assent("pending", sid, "--json", env=env)
        assert [i["seq"] for i in tray.json()["items"]] == [first, second, third]
        across = await assent("pending", "--section", "State", "--json", env=env)
        assert [(i["session_id"], i["seq"]) for i in across.json()["items"]] == [(sid, third)]

        shown = await assent("show", sid, str(first), env=env)
        assert shown.code == OK, shown.err
        assert "+Quote the order." in shown.out and "buttons: Apply edit (apply) / Decline (decline)" in shown.out
        card = (await assent("show", sid, str(first), "--json", env=env)).json()
        assert card["card"]["proposal"]["text"] == "Prefer short answers.\nQuote the order.\n"

        applied = await assent("apply", sid, str(first), "--json", env=env)
        assert applied.code == OK and applied.json()["outcome"] == "applied", applied.err
        assert (await memory(http, world.agent_id))["version"] == ada["version"] + 1

        moved = await http.put(f"/api/workspace/agents/{world.other_agent_id}/memory", json={"content": "Moved.\n"})
        assert moved.status_code == 200, moved.text
        stale = await installed("apply", sid, str(second), env=env)
        assert stale.code == CONFLICT and "409" in stale.err, (stale.code, stale.err)
        # The plan first, changing nothing; without a terminal to ask on, no --yes is refused.
        planned = await assent("apply-all", sid, "--dry-run", env=env)
        assert planned.code == OK, planned.err
        assert planned.out == f"seq {second}: apply\nseq {third}: apply\nWould apply 2 requests.\n", planned.out
        assert (await assent("decline-all", sid, "--dry-run", "--json", env=env)).json()["resolved"] == [
            {"seq": second, "kind": "memory", "outcome": "decline"},
            {"seq": third, "kind": "note", "outcome": "decline"},
        ]
        for command in ("apply-all", "decline-all"):
            refused = await assent(command, sid, env=env)
            assert refused.code == ExitCode.USAGE and "pass --yes" in refused.err, (refused.code, refused.err)
        assert (await assent("pending", sid, "--json", env=env)).json()["waiting_on"] == 2
        stopped = await assent("apply-all", sid, "--yes", env=env)
        assert stopped.code == CONFLICT, (stopped.code, stopped.out)
        assert f"seq {second}: stopped (409)" in stopped.out
        again = await assent("apply", sid, str(first), env=env)
        assert again.code == REFUSED and "error 422: this request was already applied by" in again.err, again.err

        assert (await assent("decline", sid, str(second), env=env)).code == OK
        done = await assent("apply-all", sid, "--yes", "--json", env=env)
        assert done.code == OK, done.err
        assert [(r["seq"], r["outcome"]) for r in done.json()["resolved"]] == [(third, "applied")]
        assert [d.outcome for d in (await turn.continuation()).decisions] == ["applied", "declined", "applied"]

        # The config file, when the environment says nothing; the environment wins over it; the codes.
        config = tmp_path / "config.toml"
        config.write_text(f'url = "{stack.gateway_url}"\ntoken = "{env["ASSENT_TOKEN"]}"\n')
        from_file = await assent("--config", str(config), "sessions", "--json", env={})
        assert from_file.code == OK and from_file.json()["total"] == 1, from_file.err
        wrong = await assent("--config", str(config), "sessions", env={"ASSENT_TOKEN": "nope"})
        assert wrong.code == AUTH, wrong.err
        assert (await assent("pending", "nope", env=env)).code == NOT_FOUND
        assert (await assent("--url", "http://127.0.0.1:9", "sessions", env=env)).code == UNAVAILABLE
        assert (await assent("--config", str(tmp_path / "missing.toml"), "sessions", env={})).code == FAILED


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (200, OK),
        (401, AUTH),
        (403, AUTH),
        (404, NOT_FOUND),
        (409, CONFLICT),
        (422, REFUSED),
        (400, REFUSED),
        (503, UNAVAILABLE),
        (504, UNAVAILABLE),
        (502, FAILED),
        (500, FAILED),
    ],
)
def test_each_answer_has_its_exit_code(status: int, code: int) -> None:
    assert exit_code(status) == code


def test_options_win_over_the_environment_which_wins_over_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('url = "http://file:1/"\ntoken = "from-file"\n')
    for name in ("ASSENT_URL", "ASSENT_TOKEN", "ASSENT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    assert load() == load(None) and load().url == DEFAULT_URL and load().token is None
    assert (load(str(config)).url, load(str(config)).token) == ("http://file:1", "from-file")
    monkeypatch.setenv("ASSENT_TOKEN", "from-env")
    assert load(str(config)).token == "from-env"
    assert load(str(config), url="http://option:2", token="from-option").token == "from-option"
    monkeypatch.setenv("ASSENT_CONFIG", str(config))
    assert load().url == "http://file:1"
    config.write_text('url = "x"\nsecret = "y"\n')
    with pytest.raises(ConfigError, match="unknown setting secret"):
        load(str(config))
    config.write_text("url = 3\n")
    with pytest.raises(ConfigError, match="url must be a string"):
        load(str(config))


def token_of(http: Any) -> str:
    return str(http.headers["Authorization"]).removeprefix("Bearer ")


NO_FILE = "/nonexistent/assent/config.toml"
"""The config file the isolated environment names (by XDG_CONFIG_HOME), which does not exist."""
MOMENT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


@pytest.mark.integration
async def test_a_decision_on_a_decided_request_is_the_apis_refusal_and_show_says_how_it_was_decided(
    stack: Stack,
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http)}
        ada = await memory(http, world.agent_id)
        # A login nothing reads through here (no server answers at its URL): its request is decided all the same.
        desk = await create_login(http, "http://127.0.0.1:9/mcp", ids("desk"), "guild", world.guild_id)
        turn = (await open_session(coach, http, world)).begin_turn()
        sid = turn.session.session_id
        task = await read_task(turn, world.agent_id)
        calls = [
            await propose(turn, world.agent_id, "Prefer short answers.\nQuote the order.\n", ada["version"]),
            await draft(turn, world.agent_id, "Answer refunds.\n", task["hash"]),
            await turn.call(
                "studio_edit_note",
                {"action": "create", "level": "guild", "key": "first.md", "content": "# First\n", "reason": "r"},
            ),
            await turn.call("studio_request_connection_access", {"connection_id": desk["login_id"], "reason": "r"}),
        ]
        assert all(c.ok for c in calls), [c.error for c in calls]
        await turn.end_step()
        edit, task_draft, note, login = (turn.calls[c.tool_call_id].seq for c in calls)
        await wait_pending(http, sid, 4)
        assert (await assent("apply", sid, str(edit), env=env)).code == OK
        assert (await assent("decline", sid, str(task_draft), env=env)).code == OK  # the draft's decline: discard
        granted = await assent("apply", sid, str(login), env=env)  # a login request's apply: grant
        assert (granted.code, granted.out) == (
            OK,
            f"seq {login}: granted (granted read access to Desk for the session)\n",
        )

        card = (await http.get(f"/api/studio/sessions/{sid}/edits/{edit}")).json()
        at = f"{datetime.fromisoformat(card['resolution']['resolved_at']):%Y-%m-%d %H:%M:%S} UTC"
        applied = f"error 422: this request was already applied by {OPERATOR} at {at}\n"
        again = await installed("apply", sid, str(edit), env=env)
        assert (again.code, again.out, again.err) == (REFUSED, "", applied)
        declined = await assent("decline", sid, str(edit), env=env)
        assert (declined.code, declined.err) == (REFUSED, applied)
        published = await assent("apply", sid, str(task_draft), env=env)  # a draft's apply (publish), at …/drafts/
        assert published.code == REFUSED, published.err
        assert re.fullmatch(
            f"error 422: this request was already discarded by {re.escape(OPERATOR)} at {MOMENT}\n", published.err
        )
        # A login request answered already is 409 at its endpoint (its kind's answer), so 5, in the API's words.
        for command in ("apply", "decline"):
            answered = await assent(command, sid, str(login), env=env)
            assert answered.code == CONFLICT, answered.err
            assert re.fullmatch(
                f"error 409: this request was already granted by {re.escape(OPERATOR)} at {MOMENT}\n", answered.err
            ), command

        shown = await assent("show", sid, str(edit), env=env)
        label = card["target"]["label"]
        assert (shown.code, shown.err) == (
            REFUSED,
            f"error: seq {edit} of session {sid} ({label}) is no longer open: it was applied by {OPERATOR} at {at}\n",
        )
        detail = card["resolution"]["detail"]
        assert f"outcome: applied by {OPERATOR} at {at} — {detail}\n" in shown.out, shown.out  # what became of it
        as_json = await assent("show", sid, str(edit), "--json", env=env)
        assert as_json.code == REFUSED and as_json.json()["item"] is None
        assert as_json.json()["card"]["resolution"] == card["resolution"]
        shown_draft = await assent("show", sid, str(task_draft), env=env)
        # The draft's own read carries its resolution (filled by the gateway), so the time it was decided too.
        assert shown_draft.code == REFUSED
        assert re.fullmatch(
            rf"error: seq {task_draft} of session {sid} is no longer open: it was discarded by {re.escape(OPERATOR)}"
            rf" at {MOMENT}\n",
            shown_draft.err,
        ), shown_draft.err

        missing = note + 100
        nothing = (
            f"error: session {sid} has no open request at seq {missing}: `assent pending {sid}` lists the open ones\n"
        )
        for command in ("show", "apply", "decline"):
            ran = await assent(command, sid, str(missing), env=env)
            assert (ran.code, ran.out, ran.err) == (NOT_FOUND, "", nothing), command
        # A login request is read by seq at …/logins/{seq}: show of an answered one says how it was answered.
        login_shown = await assent("show", sid, str(login), env=env)
        assert login_shown.code == REFUSED, login_shown.err
        assert re.fullmatch(
            f"error: seq {login} of session {sid} \\(.*\\) is no longer open: it was granted by {re.escape(OPERATOR)} "
            f"at {MOMENT}\n",
            login_shown.err,
        ), login_shown.err
        assert f"grant by {OPERATOR} (card): granted" in login_shown.out, login_shown.out
        assert (await assent("show", sid, str(note), env=env)).code == OK  # the open one shows as ever

        # Apply all and Decline all with nothing open resolve nothing, and say so.
        assert (
            await assent("apply-all", sid, "--yes", env=env)
        ).out == f"seq {note}: applied\nApplied 1 request; 0 requests still open.\n"
        for command, verb in (("apply-all", "Applied"), ("decline-all", "Declined")):
            ran = await assent(command, sid, "--yes", env=env)
            assert (ran.code, ran.out) == (OK, f"{verb} 0 requests; 0 requests still open.\n"), command
        late = await assent("apply", sid, str(note), env=env)
        assert late.code == REFUSED, late.err
        assert re.fullmatch(
            f"error 422: this request was already applied by {re.escape(OPERATOR)} at {MOMENT}\n", late.err
        )


@pytest.mark.integration
async def test_a_gateway_url_without_a_scheme_or_with_a_path_says_what_to_write(stack: Stack) -> None:
    async with stack.http() as http:
        await new_world(http)
        token = token_of(http)
        bare = stack.gateway_url.removeprefix("http://")
        assert bare != stack.gateway_url
        no_scheme = f"has no scheme: write http://{bare} (or https://{bare} where the gateway is served over TLS)\n"
        given = await assent("--url", bare, "sessions", env={"ASSENT_TOKEN": token})
        assert (given.code, given.out, given.err) == (
            USAGE,
            "",
            f"error: the gateway URL '{bare}' (from --url) {no_scheme}",
        )
        from_env = await installed("sessions", env={"ASSENT_URL": bare, "ASSENT_TOKEN": token})
        assert (from_env.code, from_env.err) == (
            USAGE,
            f"error: the gateway URL '{bare}' (from ASSENT_URL) {no_scheme}",
        )
        with pytest.raises(BadUrl, match="must be http:// or https:// and a host"):
            load(url="ftp://127.0.0.1:8100")

        for path in ("/console", "/api"):
            url = stack.gateway_url + path
            wrong = await assent("--url", url, "sessions", env={"ASSENT_TOKEN": token})
            assert (wrong.code, wrong.out, wrong.err) == (
                USAGE,
                "",
                f"error: {url} (from --url) answers, but not as Assent's API: GET /api/studio/sessions gave 404 Not "
                f"Found (application/json). Give the gateway's base URL, with no path after it, e.g. "
                f"{stack.gateway_url}, with --url, ASSENT_URL or url in the config file\n",
            ), path
        # The API's own 404 stays the API's.
        missing = await assent("--url", stack.gateway_url, "pending", "ses_nope", env={"ASSENT_TOKEN": token})
        expected = (await http.get("/api/studio/sessions/ses_nope/pending")).json()["detail"]
        assert (missing.code, missing.err) == (NOT_FOUND, f"error 404: {expected}\n")


@pytest.mark.integration
async def test_no_token_says_how_to_give_one_and_a_refused_token_says_it_was_refused(
    stack: Stack, tmp_path: Path
) -> None:
    url = {"ASSENT_URL": stack.gateway_url}
    none = await installed("sessions", env=url)
    assert (none.code, none.out, none.err) == (
        AUTH,
        "",
        "error 401: a bearer token is required\n"
        'no token was given: pass --token TOKEN, set ASSENT_TOKEN, or write token = "TOKEN" in '
        f"{NO_FILE} (--config or ASSENT_CONFIG names another file)\n",
    )
    refused = "error 401: the token is not valid\nthe token from {} was refused: give a valid one with --token, "
    given = await assent("--token", "nope", "sessions", env=url)
    assert (given.code, given.err) == (
        AUTH,
        refused.format("--token") + f"ASSENT_TOKEN or the config file ({NO_FILE})\n",
    )
    config = tmp_path / "config.toml"
    config.write_text(f'url = "{stack.gateway_url}"\ntoken = "nope"\n')
    in_file = await assent("--config", str(config), "sessions", env={})
    assert (in_file.code, in_file.err) == (
        AUTH,
        refused.format(f"the config file {config}") + f"ASSENT_TOKEN or the config file ({config})\n",
    )


@pytest.mark.integration
async def test_counts_of_one_are_singular(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http)}
        ada = await memory(http, world.agent_id)
        turn = await open_turn(coach, world)
        assert (await propose(turn, world.agent_id, "Quote the order.\n", ada["version"])).ok
        await turn.end_step()
        await wait_pending(http, turn.session.session_id, 1)
        sessions = await assent("sessions", env=env)
        assert sessions.code == OK and sessions.out.splitlines()[0].strip() == "1 session (page 1)", sessions.out
        across = await assent("pending", env=env)
        assert across.code == OK and across.out.splitlines()[0].strip() == "1 pending request (page 1)", across.out
    assert [plural(n, "send") for n in (0, 1, 2)] == ["0 sends", "1 send", "2 sends"]


async def test_a_login_is_granted_for_a_lifetime_and_the_logins_say_until_when(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http)}
        desk = await create_login(http, "http://127.0.0.1:9/mcp", ids("desk"), "guild", world.guild_id)
        files = await create_login(http, "http://127.0.0.1:9/mcp", ids("files"), "guild", world.guild_id)
        turn = (await open_session(coach, http, world)).begin_turn()
        sid = turn.session.session_id
        asked = await turn.call("studio_request_connection_access", {"connection_id": desk["login_id"], "reason": "r"})
        assert asked.ok, asked.error
        await turn.end_step()
        await wait_pending(http, sid, 1)
        seq = str(turn.calls[asked.tool_call_id].seq)

        wrong = await assent("apply", sid, seq, "--lifetime", "P31D", env=env)
        assert wrong.code == exit_code(422) and "at most 30 days" in wrong.err, (wrong.code, wrong.err)
        granted = await assent("apply", sid, seq, "--lifetime", "PT8H", "--json", env=env)
        assert granted.code == OK and granted.json()["outcome"] == "granted", granted.err
        [held] = [c for c in granted.json()["answer"]["connections"] if c["connection_id"] == desk["login_id"]]
        assert held["expires_at"] is not None

        popover = await assent("grant", sid, files["login_id"], "--lifetime", "PT1H", env=env)
        assert (popover.code, popover.out) == (OK, f"{files['login_id']}: granted for PT1H\n"), popover.err
        listed = await assent("logins", sid, "--json", env=env)
        ends = {c["connection_id"]: c["expires_at"] for c in listed.json()["connections"] if c["granted"]}
        hour = datetime.fromisoformat(ends[files["login_id"]]) - datetime.fromisoformat(ends[desk["login_id"]])
        assert -hour > timedelta(hours=6)  # the request's grant lasts 8 hours, the popover's 1
        table = await assent("logins", sid, env=env)
        assert table.code == OK and table.out.count("until") == 2 and "lapsed" not in table.out, table.out


@pytest.mark.integration
async def test_revert_prints_the_new_request_and_a_declined_one_is_refused(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http, memory="Be brief.\n")
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http)}
        turn = await open_turn(coach, world)
        version = (await memory(http, world.agent_id))["version"]
        calls = [await propose(turn, world.agent_id, "Be brief.\nCite orders.\n", version) for _ in range(2)]
        await turn.end_step()
        sid = turn.session.session_id
        applied, declined = (str(turn.calls[c.tool_call_id].seq) for c in calls)
        await wait_pending(http, sid, 2)
        assert (await assent("apply", sid, applied, env=env)).code == OK
        assert (await assent("decline", sid, declined, env=env)).code == OK

        reverted = await assent("revert", sid, applied, "--json", env=env)
        assert reverted.code == OK, reverted.err
        filed = reverted.json()
        assert filed["reverts"]["seq"] == int(applied) and filed["kind"] == "memory"
        printed = await assent("show", filed["session_id"], str(filed["seq"]), env=env)
        assert printed.code == OK and "-Cite orders." in printed.out, printed.out
        again = await assent("revert", sid, applied, env=env)  # pending: the Memory is not back yet, a second is fine
        assert again.code == OK and again.out.startswith(f"seq {applied} of session {sid}: its revert is request 1 of")

        once, twice = [await assent("revert", sid, applied, "--key", f"revert-{sid}", "--json", env=env) for _ in "12"]
        assert once.json()["session_id"] == twice.json()["session_id"], "a retried revert filed a second request"

        refused = await assent("revert", sid, declined, env=env)
        assert refused.code == CONFLICT and "this one is declined" in refused.err, (refused.code, refused.err)


def test_the_exit_codes_are_one_table_that_imports_with_no_side_effects() -> None:
    assert [int(code) for code in ExitCode] == list(range(9))
    assert all(code.summary and code.description and code.__doc__ == code.description for code in ExitCode)
    listed = CliRunner().invoke(cli, ["codes"])
    assert listed.output == "".join(f"{int(code)}  {code.summary}\n" for code in ExitCode)
    probe = (
        "import sys, assent_cli.exit_codes\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'click', 'httpx', 'rich'} or m.count('.') and "
        "m.startswith('assent_cli.') and m != 'assent_cli.exit_codes'))"
    )
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert (imported.stdout, imported.stderr) == ("[]\n", "")


async def test_a_session_is_named_by_the_start_of_its_id_or_as_the_latest(stack: Stack) -> None:
    """Any unique start of an id names its session; a start shared by two lists them (exit 2); none: exit 4;
    ``--latest`` is the newest open one. At 80 columns ``assent sessions`` keeps every id whole, with its names."""
    from assent.contracts import CoachInfo

    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http)}
        stem = f"ses_{uuid.uuid4().hex[:16]}"
        older = await coach.open_session(
            org_id=world.org_id,
            source_guild_id=world.guild_id,
            operator_user_id=OPERATOR,
            session_id=f"{stem}a{uuid.uuid4().hex[:15]}",
            coach=CoachInfo(name="Support coach"),
        )
        turn = older.begin_turn()
        ada = await memory(http, world.agent_id)
        assert (await propose(turn, world.agent_id, "Quote the order.\n", ada["version"], "Orders get quoted")).ok
        await turn.end_step()
        await wait_pending(http, older.session_id, 1)
        newer = await coach.open_session(
            org_id=world.org_id,
            source_guild_id=world.guild_id,
            operator_user_id=OPERATOR,
            session_id=f"{stem}b{uuid.uuid4().hex[:15]}",
        )
        await wait_pending(http, newer.session_id, 0)

        one = await assent("pending", f"{stem}a", "--json", env=env)
        assert one.code == OK and one.json()["session_id"] == older.session_id, one.err
        both = await assent("pending", stem, env=env)
        assert both.code == USAGE, both.err
        assert older.session_id in both.err and newer.session_id in both.err and "2 sessions" in both.err
        none = await assent("pending", f"{stem}z", env=env)
        assert none.code == NOT_FOUND and f"session '{stem}z' does not exist" in none.err, none.err
        latest = await assent("pending", "--latest", "--json", env=env)
        assert latest.code == OK and latest.json()["session_id"] == newer.session_id, latest.err
        shown = await assent("show", "--latest", "1", env=env)
        assert shown.code == NOT_FOUND and newer.session_id in shown.err, shown.err

        listed = await installed("sessions", env={**env, "COLUMNS": "80"})
        assert listed.code == OK, listed.err
        assert all(len(line) <= 80 for line in listed.out.splitlines()), listed.out
        assert older.session_id in listed.out and newer.session_id in listed.out, listed.out
        named = (await assent("sessions", "--json", env=env)).json()["items"]
        assert [(s["agents"], s["coach"]) for s in named] == [
            ([], None),
            ([world.agent_id], {"name": "Support coach", "channel": "studio", "model": None}),
        ], named
        assert named[0]["about"] is None and named[1]["about"].endswith(": Orders get quoted"), named
