"""A login's server identity: which URLs name the same MCP server."""

import pytest

from connections.domain.logins import Login, catalog
from connections.domain.servers import server_identity


@pytest.mark.parametrize(
    ("url", "identity"),
    [
        ("https://mcp.example.com", "https://mcp.example.com"),
        ("https://mcp.example.com/", "https://mcp.example.com"),
        ("https://MCP.Example.COM/mcp/", "https://mcp.example.com/mcp"),
        ("HTTPS://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/MCP", "https://mcp.example.com/MCP"),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("http://mcp.example.com:80/mcp", "http://mcp.example.com/mcp"),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com:8443/mcp"),
        ("http://mcp.example.com:443/mcp", "http://mcp.example.com:443/mcp"),
        ("https://mcp.example.com/mcp?tenant=a#top", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/a//", "https://mcp.example.com/a"),
        ("  https://mcp.example.com/mcp  ", "https://mcp.example.com/mcp"),
        ("http://[::1]:8080/mcp/", "http://[::1]:8080/mcp"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
        ("http://Host.example:abc/x", "http://host.example:abc/x"),
        ("not a url", "not a url"),
        (" https://host[.example/x ", "https://host[.example/x"),  # no parser reads it (the API refuses it)
    ],
)
def test_server_identity(url: str, identity: str) -> None:
    assert server_identity(url) == identity


def test_logins_to_one_server_share_its_identity_and_others_do_not() -> None:
    same = {server_identity(u) for u in ("https://MCP.example.com/mcp/", "https://mcp.example.com:443/mcp")}
    assert same == {"https://mcp.example.com/mcp"}
    assert server_identity("https://mcp.example.com/other") != server_identity("https://mcp.example.com/mcp")


def test_a_logins_catalog_names_its_server() -> None:
    login = Login("conn_a", "org_1", "org", None, "A", "https://MCP.example.com/mcp/", "bot", True, False, ())
    assert catalog(login).server == "https://mcp.example.com/mcp"
    assert catalog(login, deleted=True).server == "https://mcp.example.com/mcp"
