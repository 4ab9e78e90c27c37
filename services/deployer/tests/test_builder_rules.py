"""The builder chat's pure rules, table by table: the declaration, who may use it, and one chance to fix a file."""

from __future__ import annotations

import json

import pytest

from assent.contracts import Requester
from assent.domain import Refusal
from deployer.domain import builder

DECLARES = json.dumps({"tools": ["list_repo_files", "read_repo_file", "propose_source_change"]})
PROMPT = "You answer refund questions.\n"


@pytest.mark.parametrize(
    ("files", "agents"),
    [
        ({"agents/main/agent.json": DECLARES, "agents/main/AGENT.md": PROMPT}, ["main"]),
        ({"agents/main/agent.json": DECLARES}, []),  # read only when AGENT.md exists
        ({"agents/main/agent.json": DECLARES, "agents/main/AGENT.md": " \n\t"}, []),  # ... and is not empty
        (
            {
                "agents/main/agent.ts": "export default { tools: ['propose_source_change'] };",
                "agents/main/AGENT.md": PROMPT,
            },
            [],
        ),
        ({"agents/support/agent.json": DECLARES}, ["support"]),
        (
            {"agents/support/agent.ts": "export default { tools: ['list_repo_files', 'propose_source_change'] };"},
            ["support"],
        ),
        (
            {
                "agents/support/agent.ts": 'export const tools = [\n  "read_repo_file",\n  "propose_source_change",\n];\n'
            },
            ["support"],
        ),
        ({"agents/support/agent.ts": "export default { tools: [`propose_source_change`] };"}, ["support"]),
        ({"agents/support/agent.ts": "// tools: ['propose_source_change']\nexport default { tools: [] };"}, []),
        ({"agents/support/agent.ts": "/* tools: ['propose_source_change'] */ export default {};"}, []),
        ({"agents/support/agent.ts": "export default { tools: [...base, 'propose_source_change'] };"}, []),
        ({"agents/support/agent.ts": "export default { tools: [PROPOSE, 'read_repo_file'] };"}, []),
        ({"agents/support/agent.ts": "const note = 'propose_source_change';"}, []),
        ({"agents/support/agent.json": json.dumps({"tools": ["read_repo_file"]})}, []),
        ({"agents/support/agent.json": json.dumps({"tools": "propose_source_change"})}, []),
        ({"agents/support/agent.json": json.dumps({"skills": ["propose_source_change"]})}, []),
        ({"agents/support/agent.json": json.dumps(["propose_source_change"])}, []),
        ({"agents/support/agent.json": "{not json"}, []),
        ({"agents/support/agent.json": None}, []),  # not readable
        (
            {
                "agents/main/agent.json": DECLARES,
                "agents/main/AGENT.md": PROMPT,
                "agents/sales/agent.ts": "export default { tools: ['propose_source_change'] }",
            },
            ["main", "sales"],
        ),
    ],
)
def test_which_agents_declare_the_tool(files: dict[str, str | None], agents: list[str]) -> None:
    wanted = builder.candidate_paths(files)
    assert [d.agent for d in builder.declarations({p: files[p] for p in wanted})] == agents


def test_only_agents_files_are_read_for_a_declaration() -> None:
    tree = [
        "agents/main/AGENT.md",
        "agents/main/agent.json",
        "agents/main/agent.ts",
        "agents/sales/agent.ts",
        "agents/sales/AGENT.md",
        "amodal/agents/x/agent.json",
        "agents/x/y/agent.json",
        "agent.json",
        "skills/agent.json",
    ]
    assert builder.candidate_paths(tree) == [
        "agents/main/AGENT.md",
        "agents/main/agent.json",
        "agents/sales/agent.ts",
    ]


@pytest.mark.parametrize(
    ("declared", "from_chat", "shown", "words"),
    [
        ([builder.Declaration("main", "agents/main/agent.json")], False, True, "agents/main/agent.json"),
        ([], True, True, "proposal from chat"),
        ([], False, False, "for no agent"),
    ],
)
def test_when_the_builder_chat_shows(
    declared: list[builder.Declaration], from_chat: bool, shown: bool, words: str
) -> None:
    got, reason = builder.shown_reason(declared, from_chat)
    assert got is shown and words in reason


@pytest.mark.parametrize(
    ("requester", "refused"),
    [
        (None, False),  # run for its operator
        (Requester(user_id="u_sam", org_id="acme"), False),  # org roles are the gateway's to check
        (Requester(user_id="u_sam"), False),  # of the session's organisation
        (Requester(user_id=None), True),  # an API key: no person
        (Requester(user_id="u_x", org_id="other"), True),
        (Requester(user_id="u_own", org_id="other"), False),
        (Requester(user_id="u_ed", org_id="other"), False),
    ],
)
def test_who_may_use_the_builder_chat_as_far_as_a_call_tells(requester: Requester | None, refused: bool) -> None:
    refusal = builder.requester_refusal(requester, "acme", "ada", ("u_own",), ("u_ed",))
    assert (refusal is not None) is refused
    if refusal is not None:
        assert refusal.status == 403 and refusal.code == "builder_not_allowed"


PROBLEM = Refusal(422, "invalid_format", "stores/orders.json: not a valid store file: at entity: required")


@pytest.mark.parametrize(
    ("earlier", "starts", "words"),
    [
        (0, "stores/orders.json: not a valid store file", "one more try"),
        (1, "nothing was proposed: stores/orders.json: not a valid store file", "used its one chance"),
        (2, "nothing was proposed: stores/orders.json: not a valid store file", "used its one chance"),
        (7, "nothing was proposed: stores/orders.json: not a valid store file", "used its one chance"),
    ],
)
def test_one_chance_to_fix_a_file_per_reply(earlier: int, starts: str, words: str) -> None:
    answer = builder.one_chance(PROBLEM, earlier)
    assert (answer.status, answer.code) == (422, "invalid_format")
    assert answer.message.startswith(starts) and words in answer.message


@pytest.mark.parametrize(
    ("code", "counted"),
    [
        ("invalid_json", True),
        ("invalid_format", True),
        ("literal_credential", True),
        ("secret_value", True),
        ("wrong_location", True),
        ("path_refused", False),
        ("file_too_large", False),
        ("unread_file", False),
        ("unknown_file", False),
        ("duplicate_path", False),
        ("invalid_path", False),
    ],
)
def test_which_refusals_use_the_chance(code: str, counted: bool) -> None:
    assert (code in builder.FILE_CHECKS) is counted


def test_a_new_agent_that_proposes_changes_to_itself_gets_both_main_files() -> None:
    files = builder.with_self_editing({"skills/refunds.md": "# Refunds\n"})
    assert not isinstance(files, Refusal)
    assert sorted(files) == ["agents/main/AGENT.md", "agents/main/agent.json", "skills/refunds.md"]
    assert json.loads(files["agents/main/agent.json"]) == json.loads(DECLARES)
    read = {path: files[path] for path in builder.candidate_paths(files)}
    assert builder.declarations(read) == [builder.Declaration("main", "agents/main/agent.json")]
    clash = builder.with_self_editing({"agents/main/AGENT.md": PROMPT})
    assert isinstance(clash, Refusal) and clash.status == 422
    assert clash.message.startswith("agents/main/AGENT.md: propose_changes_to_itself writes")
