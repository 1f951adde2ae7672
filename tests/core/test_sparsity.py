"""Sparse-checkout patterns decide as git decides: for every path of a repository and many pattern
files (cone and non-cone, the ones ``git sparse-checkout set`` writes and hand-written ones),
``SparsePatterns.includes`` agrees with the skip-worktree bits ``git read-tree -mu HEAD`` gives
(``git ls-files -t``: ``S`` left out, ``H`` checked out)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from applyonce.core.sparsity import SparsePatterns
from applyonce.core.wildmatch import wildmatch
from tests.conftest import GIT_ENV, Repo, make_repo

PATHS = (
    "README.md",
    "setup.py",
    "a/f",
    "a/b.txt",
    "a/b/f",
    "a/b/c/f",
    "a/b/c/d/e.md",
    "a/bc/f",
    "a/B/f",
    "ab/f",
    "docs/notes.md",
    "docs/api/x.md",
    "docs/api/v1/y.txt",
    "src/app.py",
    "src/lib/util.py",
    "src/lib/deep/er/x.py",
    "tests/test_app.py",
    "x/docs/y.md",
    "x/y/z.txt",
    "weird dir/f ile",
    "star*dir/f",
    "brack[et]/f",
    "CAPS/F.TXT",
    "q?/f",
    "#hash/f",
    "!bang/f",
    "dir.md/f",
    "trailing/sp ",
)

NON_CONE = (
    "/*\n!/*/\n",
    "/*\n!/docs/\n",
    "*.md\n",
    "docs/\n",
    "/docs/\n!/docs/api/\n",
    "/docs/\n!/docs/api/\n/docs/api/v1/\n",
    "/*\n!/*/\n/src/lib/\n",
    "src/**/x.py\n",
    "**/f\n",
    "/a/*/f\n",
    "a/b\n",
    "a/b/\n",
    "!*.md\n/*\n",
    "/*\n!*.md\n",
    "[a-c]*/\n",
    "*/\n",
    "*\n!*/\n",
    "/docs/*\n!/docs/notes.md\n",
    "x/\n",
    "/star\\*dir/\n",
    "star*dir/\n",
    "# a comment\n\n/src/   \n\\#hash/\n\\!bang/\n",
    "/src/\r\n/a/b/\r\n",
    "\ufeff/docs/\n",
    "F.TXT\n",
    "*.TXT\n",
    "/a/b/c/\n",
    "/*\n!/a/\n/a/b/c/\n",
    "trailing/sp\\ \n",
    "**/c/**\n",
    "a/**\n",
    "/q?/\n",
    "[[:upper:]]*/\n",
    "",
)

CONE_SETS = (
    (),
    ("src",),
    ("a/b",),
    ("a/b", "docs"),
    ("src/lib/deep",),
    ("weird dir",),
    ("star*dir", "brack[et]"),
    ("docs/api", "x/y"),
)

HAND_CONE = (
    "/*\n!/*/\n/a/b/\n",  # a folder without its parents' lines: only below a/b
    "/*\n",  # everything
    "/*\n!/*/\n/docs/\n!/docs/*/\n",  # a parent's files, none of its folders
    "/src/\n",  # no root lines
    "/*\n!/*/\n*.md\n",  # not cone form: matched as non-cone patterns
    "/*\n!/*/\n!/a/*/\n",  # a parent line without its folder: not cone form
    "/*\n!/*/\n/a/\n!/a/*/\n/a/\n",  # a folder listed again after its parent line: not cone form
    "/*\n!/*/\n/a/\n/a/b/\n",  # a folder and one inside it
    "/*\n!/*/\n/docs/\n/docs/\n!/docs/*/\n",  # listed twice: still all below it
    "/*\n!/*/\n/docs/**/\n",  # '**': not cone form
    "/*\n!/*/\n/star\\*dir/\n",
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """One commit holding every path of ``PATHS``."""
    root = tmp_path_factory.mktemp("sparsity")
    # Made before the (function-scoped) hermetic environment of each test: made hermetic here.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(root))
        for key, value in GIT_ENV.items():
            env.setenv(key, value)
        return make_repo(root / "repo", {path: f"{path}\n" for path in PATHS})


def _git_decides(
    repo: Repo, text: str, *, cone: bool, ignore_case: bool = False
) -> dict[str, bool]:
    """Each path of the commit: whether git checks it out under the sparse-checkout file
    ``text`` (True) or gives it the skip-worktree bit."""
    # On the command line: above config.worktree, where 'git sparse-checkout set' writes.
    config = (
        "-c",
        "core.sparseCheckout=true",
        "-c",
        f"core.sparseCheckoutCone={str(cone).lower()}",
        "-c",
        f"core.ignoreCase={str(ignore_case).lower()}",
    )
    info = repo.path / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "sparse-checkout").write_bytes(text.encode())
    repo.git(*config, "read-tree", "-mu", "HEAD")
    decided = {}
    for line in repo.git(*config, "ls-files", "-t", "-z").split("\0"):
        if line:
            tag, path = line.split(" ", 1)
            decided[path] = tag == "H"
    assert set(decided) == set(PATHS)
    return decided


def _ours(text: str, *, cone: bool, ignore_case: bool = False) -> dict[str, bool]:
    patterns = SparsePatterns.parse(text.encode(), cone=cone, ignore_case=ignore_case)
    return {path: patterns.includes(path) for path in PATHS}


@pytest.mark.parametrize("text", NON_CONE)
def test_non_cone_patterns_decide_as_git_does(tree: Repo, text: str) -> None:
    assert _ours(text, cone=False) == _git_decides(tree, text, cone=False)


@pytest.mark.parametrize("folders", CONE_SETS, ids=lambda f: ",".join(f) or "root")
def test_cone_folders_set_by_git_decide_as_git_does(tree: Repo, folders: tuple[str, ...]) -> None:
    tree.git("sparse-checkout", "set", "--cone", "--skip-checks", *folders)
    text = (tree.path / ".git" / "info" / "sparse-checkout").read_text()
    assert _ours(text, cone=True) == _git_decides(tree, text, cone=True)


@pytest.mark.parametrize("text", HAND_CONE)
def test_hand_written_cone_files_decide_as_git_does(tree: Repo, text: str) -> None:
    assert _ours(text, cone=True) == _git_decides(tree, text, cone=True)


@pytest.mark.parametrize(
    ("text", "cone"),
    [("f.txt\n", False), ("/caps/\n", False), ("/*\n!/*/\n/caps/\n/A/\n!/A/*/\n", True)],
)
def test_ignore_case_matches_either_case_as_git_does(tree: Repo, text: str, cone: bool) -> None:
    ours = _ours(text, cone=cone, ignore_case=True)
    assert ours == _git_decides(tree, text, cone=cone, ignore_case=True)


FRAGMENTS = ("*", "**", "?", "/", "a", "b", "docs", "src", "[a-c]", "[!a]", ".md", "!", "\\*")


@settings(max_examples=40)
@given(
    st.lists(
        st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4).map("".join),
        min_size=1,
        max_size=4,
    )
)
def test_generated_patterns_decide_as_git_does(tree: Repo, lines: list[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    assert _ours(text, cone=False) == _git_decides(tree, text, cone=False)


@pytest.mark.parametrize(
    ("pattern", "text", "pathname", "expected"),
    [
        ("*.py", "src/a.py", True, False),
        ("*.py", "src/a.py", False, True),
        ("src/**/x.py", "src/x.py", True, True),
        ("src/**/x.py", "src/a/b/x.py", True, True),
        ("**/x.py", "x.py", True, True),
        ("a/**", "a/b/c", True, True),
        ("a/**", "a", True, False),
        ("a**b", "a/x/b", True, False),
        ("[!a-c]x", "dx", True, True),
        ("[^a-c]x", "bx", True, False),
        ("[]]", "]", True, True),
        ("[[:digit:]]*", "7up", True, True),
        ("[[:nope:]]", "n", True, False),
        ("\\*", "*", True, True),
        ("\\*", "a", True, False),
        ("a?c", "a/c", True, False),
        ("a?c", "a/c", False, True),
    ],
)
def test_wildmatch(pattern: str, text: str, pathname: bool, expected: bool) -> None:
    assert wildmatch(pattern.encode(), text.encode(), pathname=pathname) is expected


def test_wildmatch_casefold_folds_ascii_letters() -> None:
    assert wildmatch(b"SRC/*.PY", b"src/a.py", pathname=True, casefold=True)
    assert not wildmatch(b"SRC/*.PY", b"src/a.py", pathname=True)
    assert wildmatch(b"[A-C]x", b"bx", casefold=True)


def test_paths_outside_a_cone_and_inside_it() -> None:
    cone = SparsePatterns.parse(b"/*\n!/*/\n/a/\n!/a/*/\n/a/b/\n", cone=True)
    assert cone.includes("README.md")  # the root's files, always
    assert cone.includes("a/f")  # a parent's own files
    assert cone.includes("a/b/c/d")  # all below a listed folder
    assert not cone.includes("a/c/f")
    assert not cone.includes("docs/notes.md")
