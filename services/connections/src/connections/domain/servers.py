"""The identity of an MCP server: what makes two logins' server URLs name the same server. Pure, no I/O."""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def server_identity(url: str) -> str:
    """``url`` normalized to the server it names: the scheme and host in lower case, the port unless it is the
    scheme's default (80 for http, 443 for https), and the path as written without its trailing slashes. A user,
    password, query or fragment is dropped: none of them changes which server a login talks to. An IPv6 host keeps
    its brackets. A URL without a scheme or host (the API refuses one) comes back stripped of surrounding space."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:  # not a URL (the API refuses one): itself, as written
        return url.strip()
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not scheme or not host:
        return url.strip()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: keep what was written, so distinct text stays distinct
        port = None
        host = parts.netloc.rpartition("@")[2].lower()
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    return f"{scheme}://{host}{parts.path.rstrip('/')}"
