"""One word per concept (the glossary, docs/explanation/words.md): the retired words stay out of the code.

A *proposal* was once a *request* in the gateway (its table, its functions, its session events): the check
fails on an identifier of the code that says ``request`` unless it names something else that the glossary keeps
(the HTTP request, the one who asked, the seed's tool names), on the live events ``request.proposed`` and
``request.decided`` (they are ``proposal.proposed`` and ``proposal.decided``), and on a table named ``requests``.
It reads the Python of every package (past migrations aside: they are history) and the console's script."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "explanation" / "words.md"

KEPT = frozenset(
    {
        # the HTTP request, its body and its metrics
        "request",
        "Request",
        "RequestModel",
        "RequestValidationError",
        "requestBody",
        "request_timeout_ms",
        "assent_http_requests",
        "assent_http_requests_total",
        "assent_http_request_seconds",
        "XMLHttpRequest",
        "HTTP_REQUESTS",
        # JSON-RPC's error codes and request types (MCP), and Starlette's module of the HTTP request
        "INVALID_REQUEST",
        "REQUEST_TIMEOUT",
        "CallToolRequestParams",
        "PaginatedRequestParams",
        "requests",
        # asking
        "request_build",
        # the seed's tool and widget names, and the arguments of its tool
        "studio_edit_request",
        "studio_request_connection_access",
        "RequestAccess",
        # a provider's change request
        "merge_request",
        "merge_requests",
        "change_request_link",
        # the Studio request a write carried out (provenance columns)
        "studio_request",
        # the browser's
        "requestAnimationFrame",
        "requestSubmit",
    }
)
"""Identifiers that say ``request`` and mean something else than a proposal; each is named in the glossary."""

HTTP_BODY = re.compile(r"[A-Z]\w*Request")
"""A model of an HTTP request's body (``NoteRequest``): kept."""
RETIRED_NAME = re.compile(r"request(?!e[dr])", re.IGNORECASE)
"""*request*, but not *requester* (the one who asked) nor *requested* (asked for): other words."""
RETIRED_STRING = re.compile(r"\brequest\.(proposed|decided)\b|^requests$|\.requests\b")


def code_files() -> Iterator[Path]:
    for pattern in (
        "shared/src/**/*.py",
        "services/*/src/**/*.py",
        "services/*/contract/src/**/*.py",
        "cli/src/**/*.py",
    ):
        for path in sorted(ROOT.glob(pattern)):
            if "migrations/versions" not in path.as_posix():
                yield path
    yield from sorted(ROOT.glob("services/*/src/*/console/static/*.js"))


def retired_name(name: str) -> bool:
    return bool(RETIRED_NAME.search(name)) and name not in KEPT and not HTTP_BODY.fullmatch(name)


def python_words(text: str) -> Iterator[tuple[int, str, str]]:
    """(line, "name" or "string", text) of each identifier and string literal."""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME:
            yield token.start[0], "name", token.string
        elif token.type == tokenize.STRING:
            yield token.start[0], "string", token.string.strip("rbfuRBFU").strip("'\"")


JS_TOKEN = re.compile(
    r"//[^\n]*|/\*.*?\*/|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"|`(?:\\.|[^`\\])*`|[A-Za-z_$][\w$]*", re.DOTALL
)


def js_words(text: str) -> Iterator[tuple[int, str, str]]:
    for match in JS_TOKEN.finditer(text):
        token, line = match.group(), text.count("\n", 0, match.start()) + 1
        if token.startswith(("//", "/*")):
            continue
        if token[0] in "'\"`":
            yield line, "string", token[1:-1]
        else:
            yield line, "name", token


def retired_words(path: Path) -> list[str]:
    """``file:line: word`` of each retired word in ``path``."""
    text = path.read_text()
    words = js_words(text) if path.suffix == ".js" else python_words(text)
    found = []
    for line, what, word in words:
        string = RETIRED_STRING.search(word) if what == "string" else None
        if string is not None or (what == "name" and retired_name(word)):
            found.append(
                f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{line}: "
                f"{word if string is None else string.group()}"
            )
    return found


def test_no_retired_word_in_the_code() -> None:
    found = [hit for path in code_files() for hit in retired_words(path)]
    assert found == [], "a retired word (docs/explanation/words.md): " + ", ".join(found)


@pytest.mark.parametrize(
    ("word", "retired"),
    [
        ("request_of", True),
        ("open_requests", True),
        ("RequestState", True),
        ("pending_requests", True),
        ("request", False),
        ("NoteRequest", False),
        ("studio_edit_request", False),
        ("proposal_of", False),
        ("requester_refusal", False),
        ("RequestedDeployLinks", False),
        ("requests_requested", True),
    ],
)
def test_the_check_tells_a_retired_name(word: str, retired: bool) -> None:
    assert retired_name(word) is retired


@pytest.mark.parametrize(
    ("source", "suffix", "hits"),
    [
        ('events.append(event("request.decided"))\n', ".py", ["request.decided"]),
        ('Table("requests", metadata)\n', ".py", ["requests"]),
        ('SQL = f"SELECT * FROM {SCHEMA}.requests"\n', ".py", [".requests"]),
        ("def read(request: Request, proposal_of: int) -> None: ...\n", ".py", []),
        ('"""Answers requests: an HTTP request in prose is no name."""\n', ".py", []),
        (
            "source.addEventListener('request.proposed', onRequest) // a request\n",
            ".js",
            ["request.proposed", "onRequest"],
        ),
        ("const text = `the login request`; fetch(url, {method: 'POST'})\n", ".js", []),
    ],
)
def test_the_check_finds_retired_words(tmp_path: Path, source: str, suffix: str, hits: list[str]) -> None:
    path = tmp_path / f"sample{suffix}"
    path.write_text(source)
    assert [hit.rsplit(": ", 1)[1] for hit in retired_words(path)] == hits


def test_the_glossary_names_every_kept_word() -> None:
    glossary = GLOSSARY.read_text()
    missing = sorted(word for word in KEPT if f"`{word}`" not in glossary)
    assert missing == [], f"kept words the glossary does not name: {missing}"
