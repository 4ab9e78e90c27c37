"""Links to a provider's page that opens a pull request (GitHub) or a merge request (GitLab) from a branch onto
the production branch; approvals onto a branch other than production show them."""

from __future__ import annotations

from urllib.parse import quote, urlencode


def web_url(remote: str) -> str:
    """The repository's web address from its remote URL (``https://host/o/r.git``, ``git@host:o/r.git``)."""
    url = remote.removesuffix(".git").removesuffix("/")
    if url.startswith("git@") and ":" in url:
        host, path = url[len("git@") :].split(":", 1)
        return f"https://{host}/{path}"
    if "://" in url:
        scheme, rest = url.split("://", 1)
        rest = rest.split("@", 1)[-1]  # never a credential in a link
        return f"{'https' if scheme in ('ssh', 'git') else scheme}://{rest}"
    return url


def change_request_link(provider: str, remote: str, production: str, branch: str) -> str:
    base = web_url(remote)
    if provider == "github":
        return f"{base}/compare/{quote(production, safe='')}...{quote(branch, safe='')}?expand=1"
    query = urlencode({"merge_request[source_branch]": branch, "merge_request[target_branch]": production})
    return f"{base}/-/merge_requests/new?{query}"
