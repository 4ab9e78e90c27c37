"""What the API takes as a login's server URL: the pattern it publishes is the whole check, and what it admits never
breaks the server's identity (which names a URL no parser reads as written)."""

import pytest
from pydantic import TypeAdapter, ValidationError

from connections.domain.servers import server_identity
from connections_contract.routes import ServerUrl

SERVER_URL: TypeAdapter[str] = TypeAdapter(ServerUrl)


@pytest.mark.parametrize(
    ("url", "identity"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("http://[::1]:8080/mcp", "http://[::1]:8080/mcp"),
        ("https://h.example/a/[b]?c=d", "https://h.example/a/[b]"),
        ("http://[0]", "http://[0]"),  # bracketed, no address: named as written
        ("http://mcp.example.com:99999", "http://mcp.example.com:99999"),
        ("https://mcp\uff03.example.com", "https://mcp\uff03.example.com"),  # a '#' once NFKC-normalised
    ],
)
def test_urls_the_api_takes_and_the_server_each_names(url: str, identity: str) -> None:
    assert SERVER_URL.validate_python(url) == url
    assert server_identity(url) == identity


@pytest.mark.parametrize(
    "url",
    [
        "ftp://mcp.example.com",
        "https://bot:secret@mcp.example.com",
        "https://host[.example/x",  # a bracket outside an IPv6 host
        "https://\u00eb|x[.$R",
        "http://[zz]/",
        "http://[::1:8080/",
        "https://mcp.example.com/a b",
    ],
)
def test_urls_the_api_refuses(url: str) -> None:
    with pytest.raises(ValidationError) as refused:
        SERVER_URL.validate_python(url)
    assert [error["type"] for error in refused.value.errors()] == ["pattern_mismatch"]
