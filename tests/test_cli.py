"""``assent`` against the real services: a read with ``--json``, show's diff, apply, apply-all, the exit code of a
stale apply (and of a stale request stopping Apply all), of a missing session, a bad token and no gateway; the config
file and the environment. The installed command runs as a process for a read and the stale apply; the rest run in
this process (Click's runner, in a thread), which costs no interpreter start each."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from assent_cli.client import AUTH, CONFLICT, FAILED, NOT_FOUND, OK, REFUSED, UNAVAILABLE, exit_code
from assent_cli.config import DEFAULT_URL, ConfigError, load
from assent_cli.main import cli
from tests.conftest import Stack, new_world
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

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
        stopped = await assent("apply-all", sid, env=env)
        assert stopped.code == CONFLICT, (stopped.code, stopped.out)
        assert f"seq {second}: stopped (409)" in stopped.out
        again = await assent("apply", sid, str(first), env=env)
        assert again.code == NOT_FOUND, again.err  # no longer open

        assert (await assent("decline", sid, str(second), env=env)).code == OK
        done = await assent("apply-all", sid, "--json", env=env)
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
