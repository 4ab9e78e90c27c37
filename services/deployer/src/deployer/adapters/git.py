"""Agents' source repositories as real git repositories on disk, through the ``git`` command line.

Why the command line (run with ``asyncio`` subprocesses) and not a library: the deployer works on bare
repositories only (no work tree), with plumbing that git keeps stable for scripts (``ls-tree``, ``cat-file
--batch``, ``hash-object``, ``update-index`` on a private index, ``commit-tree``, ``update-ref`` with the old
value as a compare-and-set, ``push`` without force); it speaks every transport the deployment's git speaks
(``file://``, HTTPS, SSH) for external sources; and it never blocks the event loop. dulwich would re-implement
git in Python (slower on large trees, fewer transports); GitPython drives the same command line, synchronously.

A **hosted** source is a bare repository the deployer owns (``<root>/<agent>.git``); its production branch is
``main`` and each commit on it is the next source version. An **external** source is a remote (``origin``) with a
production branch (its default branch unless set); the deployer keeps a bare copy, fetches before it reads or
commits, and pushes commits without force, so a remote that moved meanwhile refuses the push
(:class:`BranchMoved`) instead of losing a commit. Contracts: every method raises :class:`GitError` (with git's
message, never a credential) when git fails; reads of a commit the copy lacks fetch it once.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Mode = Literal["hosted", "external"]
Provider = Literal["github", "gitlab"]
HOSTED_BRANCH = "main"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_CREDENTIALS = re.compile(r"(//)[^/@\s]+@")


class GitError(Exception):
    """git failed; the message is git's, with any credential in a URL removed."""


class BranchMoved(Exception):
    """The production branch moved while a commit was being made; nothing was written."""


@dataclass(frozen=True)
class Source:
    """Where an agent's source lives."""

    agent_id: str
    mode: Mode
    branch: str
    url: str | None = None
    provider: Provider | None = None


@dataclass(frozen=True)
class Entry:
    path: str
    size: int


class GitRepos:
    """Every agent's repository under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, asyncio.Lock] = {}

    def path(self, agent_id: str) -> Path:
        return self.root / f"{_SAFE.sub('_', agent_id)}.git"

    def lock(self, agent_id: str) -> asyncio.Lock:
        return self._locks.setdefault(agent_id, asyncio.Lock())

    async def _git(
        self, repo: Path | None, *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None
    ) -> bytes:
        command = ["git", *(["--git-dir", str(repo)] if repo is not None else []), *args]
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})},
        )
        out, err = await process.communicate(stdin)
        if process.returncode != 0:
            message = _CREDENTIALS.sub(r"\1", err.decode(errors="replace").strip())
            raise GitError(f"git {args[0]} failed: {message}")
        return out

    # --- set-up -------------------------------------------------------------------------------------

    async def create_hosted(self, agent_id: str) -> Source:
        """A new empty bare repository for a hosted source (an existing one is kept)."""
        repo = self.path(agent_id)
        if not repo.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            await self._git(None, "init", "--quiet", "--bare", "--initial-branch", HOSTED_BRANCH, str(repo))
        return Source(agent_id, "hosted", HOSTED_BRANCH)

    async def attach_external(self, agent_id: str, url: str, provider: Provider, branch: str | None = None) -> Source:
        """A bare copy of the remote at ``url``; the production branch is ``branch`` or the remote's default."""
        repo = self.path(agent_id)
        if not repo.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            await self._git(None, "init", "--quiet", "--bare", str(repo))
            await self._git(repo, "remote", "add", "origin", url)
        else:
            await self._git(repo, "remote", "set-url", "origin", url)
        if branch is None:
            listing = (await self._git(repo, "ls-remote", "--symref", "origin", "HEAD")).decode()
            found = re.search(r"^ref: refs/heads/(\S+)\s+HEAD", listing, re.MULTILINE)
            if found is None:
                raise GitError("git ls-remote failed: the remote names no default branch")
            branch = found.group(1)
        source = Source(agent_id, "external", branch, url, provider)
        await self.fetch(source)
        return source

    async def fetch(self, source: Source) -> None:
        if source.mode == "external":
            await self._git(
                self.path(source.agent_id),
                "fetch",
                "--quiet",
                "--prune",
                "origin",
                "+refs/heads/*:refs/remotes/origin/*",
            )

    def _ref(self, source: Source) -> str:
        return f"refs/heads/{source.branch}" if source.mode == "hosted" else f"refs/remotes/origin/{source.branch}"

    # --- reading ------------------------------------------------------------------------------------

    async def head(self, source: Source, *, fetch: bool = True) -> str | None:
        """The production branch's commit now (None: the branch has no commit yet)."""
        if fetch:
            await self.fetch(source)
        try:
            out = await self._git(self.path(source.agent_id), "rev-parse", "--verify", "--quiet", self._ref(source))
        except GitError:
            return None
        return out.decode().strip() or None

    async def branch_head(self, source: Source, branch: str, *, fetch: bool = True) -> str | None:
        """The commit of any ``branch`` of the source now (None: no such branch)."""
        if fetch:
            await self.fetch(source)
        ref = f"refs/heads/{branch}" if source.mode == "hosted" else f"refs/remotes/origin/{branch}"
        try:
            out = await self._git(self.path(source.agent_id), "rev-parse", "--verify", "--quiet", ref)
        except GitError:
            return None
        return out.decode().strip() or None

    async def has_commit(self, source: Source, commit: str) -> bool:
        try:
            await self._git(self.path(source.agent_id), "cat-file", "-e", f"{commit}^{{commit}}")
            return True
        except GitError:
            return False

    async def _ensure(self, source: Source, commit: str) -> None:
        if not await self.has_commit(source, commit):
            await self.fetch(source)
            if not await self.has_commit(source, commit):
                raise GitError(f"git cat-file failed: commit {commit} is not in the repository")

    async def tree(self, source: Source, commit: str) -> list[Entry]:
        """Every file of ``commit`` with its size in bytes, in path order (submodules and links left out)."""
        await self._ensure(source, commit)
        out = await self._git(self.path(source.agent_id), "ls-tree", "-r", "-l", "-z", commit)
        entries = []
        for record in out.decode().split("\0"):
            if not record:
                continue
            meta, path = record.split("\t", 1)
            mode, kind, _, size = meta.split()
            if kind == "blob" and mode in ("100644", "100755"):
                entries.append(Entry(path, int(size)))
        return sorted(entries, key=lambda e: e.path)

    async def read(self, source: Source, commit: str, paths: list[str]) -> dict[str, bytes | None]:
        """The bytes of each path at ``commit`` (None: no such file)."""
        if not paths:
            return {}
        await self._ensure(source, commit)
        request = "".join(f"{commit}:{path}\n" for path in paths).encode()
        out = await self._git(self.path(source.agent_id), "cat-file", "--batch", stdin=request)
        found: dict[str, bytes | None] = {}
        at = 0
        for path in paths:
            end = out.index(b"\n", at)
            header = out[at:end].decode()
            at = end + 1
            if header.endswith(" missing") or header.split()[1] != "blob":
                found[path] = None
                continue
            size = int(header.split()[2])
            found[path] = out[at : at + size]
            at += size + 1
        return found

    async def blobs(self, source: Source, commit: str) -> list[tuple[str, int, bytes]]:
        """Every file of ``commit`` as (path, mode, bytes), in path order: what a build checks and packs."""
        entries = await self.tree(source, commit)
        out = await self._git(self.path(source.agent_id), "ls-tree", "-r", "-z", commit)
        modes = {}
        for record in out.decode().split("\0"):
            if record:
                meta, path = record.split("\t", 1)
                modes[path] = int(meta.split()[0], 8)
        texts = await self.read(source, commit, [e.path for e in entries])
        return [(e.path, modes[e.path], texts[e.path] or b"") for e in entries]

    async def commit_naming(self, source: Source, marker: str, branch: str | None = None) -> str | None:
        """The commit on the production branch (or ``branch``) whose message holds ``marker`` (a proposal's
        trailer), if any."""
        head = (
            await self.head(source, fetch=False)
            if branch is None
            else await self.branch_head(source, branch, fetch=False)
        )
        if head is None:
            return None
        out = await self._git(
            self.path(source.agent_id), "log", "-n", "50", "--format=%H", "--fixed-strings", f"--grep={marker}", head
        )
        found = out.decode().split()
        return found[0] if found else None

    async def count(self, source: Source, commit: str) -> int:
        out = await self._git(self.path(source.agent_id), "rev-list", "--count", commit)
        return int(out.decode().strip())

    # --- writing ------------------------------------------------------------------------------------

    async def commit(
        self,
        source: Source,
        parent: str | None,
        changes: Mapping[str, str | None],
        *,
        author: tuple[str, str],
        message: str,
        branch: str | None = None,
        new_branch: bool = False,
    ) -> str:
        """Commit ``changes`` (path -> text, None: delete) on top of ``parent`` and make it the head of the
        production branch (or of ``branch``): a compare-and-set on a hosted branch, a push without force to an
        external one; with ``new_branch`` the branch must not exist yet.
        Raises :class:`BranchMoved` when the branch is no longer at ``parent`` (or exists already)."""
        repo = self.path(source.agent_id)
        with tempfile.TemporaryDirectory(prefix="assent-index-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            if parent is not None:
                await self._git(repo, "read-tree", parent, env=env)
            for path, text in sorted(changes.items()):
                if text is None:  # mode 0 removes the entry; --force-remove would need a work tree
                    removal = f"0 {'0' * 40}\t{path}\n".encode()
                    await self._git(repo, "update-index", "--index-info", stdin=removal, env=env)
                    continue
                blob = (await self._git(repo, "hash-object", "-w", "--stdin", stdin=text.encode())).decode().strip()
                await self._git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = (await self._git(repo, "write-tree", env=env)).decode().strip()
        name, email = author
        identity = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": "Assent deployer",
            "GIT_COMMITTER_EMAIL": "deployer@assent.invalid",
        }
        parents = ["-p", parent] if parent is not None else []
        commit = (
            (await self._git(repo, "commit-tree", tree, *parents, stdin=message.encode(), env=identity))
            .decode()
            .strip()
        )
        target = branch or source.branch
        if source.mode == "hosted":
            expected = "0" * 40 if new_branch else parent or "0" * 40
            try:
                await self._git(repo, "update-ref", f"refs/heads/{target}", commit, expected)
            except GitError as exc:
                raise BranchMoved(str(exc)) from None
            return commit
        lease = [f"--force-with-lease=refs/heads/{target}:"] if new_branch else []
        try:
            await self._git(repo, "push", "--quiet", *lease, "origin", f"{commit}:refs/heads/{target}")
        except GitError as exc:
            if any(w in str(exc) for w in ("rejected", "fetch first", "non-fast-forward", "stale info")):
                raise BranchMoved(str(exc)) from None
            raise
        await self.fetch(source)
        return commit
