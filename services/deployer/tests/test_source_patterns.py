"""The deployer's contract: the patterns the public document states say what the rules behind them say, and a tree
holds no file that is also a folder."""

from __future__ import annotations

import re
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assent.domain import Refusal
from deployer_contract.source import BRANCH_NAME, REPOSITORY_PATH, folder_clash, repository_path

DERANDOMIZED = settings(derandomize=True, max_examples=300, database=None)

PATH_PARTS = st.sampled_from(["a", "b.md", ".", "..", ".git", ".GIT.", ".git ", "git~1", "", " ", "x\\y", "é", "\x01"])


@DERANDOMIZED
@given(st.lists(PATH_PARTS, min_size=1, max_size=4).map("/".join) | st.text(max_size=12))
def test_the_repository_path_pattern_accepts_what_the_rule_accepts(path: str) -> None:
    assert (re.fullmatch(REPOSITORY_PATH, path) is not None) == (not isinstance(repository_path(path), Refusal))


BRANCHES = [
    "main", "feature/x", "a.b", "release-1.0", "assent/confirm", "é", "HEAD", "@", "-x", "/x", "x/", "x.", ".x",
    "a/.b", "a..b", "a//b", "a@{b", "a.lock", "a.lock/b", "a b", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a\\b",
    "a\x7fb", "x" * 200, "head", "a@b", "a.lockb",
]  # fmt: skip


@pytest.mark.parametrize("name", BRANCHES)
def test_the_branch_pattern_accepts_what_git_accepts(name: str) -> None:
    git = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], capture_output=True, check=False)
    accepted = git.returncode == 0 and not name.startswith("-") and name != "HEAD"  # as `git branch` takes it
    assert (re.fullmatch(BRANCH_NAME, name) is not None) == accepted, name


def test_a_file_that_is_a_folder_of_another_is_no_tree() -> None:
    assert folder_clash(["a.md", "a.md/b.md"]) == "a.md"
    assert folder_clash(["x/y", "x/y/z"]) == "x/y"
    assert folder_clash(["a", "a-b/c", "ab", "a.b/c"]) is None
