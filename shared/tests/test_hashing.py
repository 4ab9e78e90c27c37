from assent.hashing import content_hash, line_counts, unified_diff


def test_hash_is_stable_and_prefixed() -> None:
    assert content_hash("") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_line_counts() -> None:
    assert line_counts("a\nb\n", "a\nb\n") == (0, 0)
    assert line_counts("", "a\nb\n") == (2, 0)
    assert line_counts("a\nb\nc\n", "a\nc\nd\n") == (1, 1)
    assert line_counts("a\n", "") == (0, 1)


def test_unified_diff() -> None:
    diff = unified_diff("a\nb\n", "a\nc\n", "memory.md")
    assert diff.splitlines()[:2] == ["--- a/memory.md", "+++ b/memory.md"]
    assert "-b" in diff.splitlines() and "+c" in diff.splitlines()
