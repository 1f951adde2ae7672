"""What agents wrap a Codex patch in (``patch/wrappers.py``): markdown fences, heredocs, a
command substitution, ``cd DIR &&``; each is taken off, and a wrapper opened but not closed, or a
``cd`` out of the repository, refuses the text with one line."""

from __future__ import annotations

import pytest

from applyonce.patch import PatchSyntaxError, UpdateFile, detect_format, parse, parse_codex

PATCH = (
    "*** Begin Patch\n*** Update File: a.py\n@@\n-old\n+new\n*** Add File: docs/n.md\n+n\n"
    "*** Update File: b.py\n*** Move to: c.py\n@@\n-b\n+c\n*** End Patch\n"
)


def paths(text: str) -> list[tuple[str, str | None]]:
    return [
        (op.path, op.move_to if isinstance(op, UpdateFile) else None)
        for op in parse_codex(text).operations
    ]


BARE = [("a.py", None), ("docs/n.md", None), ("b.py", "c.py")]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("```\n" + PATCH + "```\n", id="fence"),
        pytest.param("```diff\n" + PATCH + "```", id="fence-with-language"),
        pytest.param(
            "Here is the patch:\n\n```patch\n" + PATCH + "```\n\nRun the tests after.\n",
            id="fence-with-prose-around",
        ),
        pytest.param("~~~~\n" + PATCH + "~~~~\n", id="tilde-fence"),
        pytest.param("```\n" + PATCH + "`````\n", id="a-longer-fence-closes"),
        pytest.param(
            "Applying:\n```bash\napply_patch <<'EOF'\n" + PATCH + "EOF\n```\n", id="fenced-heredoc"
        ),
        pytest.param("apply_patch \"$(cat <<'EOF'\n" + PATCH + 'EOF\n)"\n', id="cat-substitution"),
        pytest.param('apply_patch "$(cat <<EOF\n' + PATCH + 'EOF\n)"', id="cat-substitution-bare"),
        pytest.param("cd . && apply_patch <<'EOF'\n" + PATCH + "EOF\n", id="cd-dot"),
        pytest.param(("```\n" + PATCH + "```\n").replace("\n", "\r\n"), id="fence-crlf"),
    ],
)
def test_a_wrapped_patch_reads_as_the_bare_one(text: str) -> None:
    assert parse_codex(text).model_dump() == parse_codex(PATCH).model_dump()
    assert detect_format(text) == "codex"
    assert parse(text).model_dump() == parse_codex(PATCH).model_dump()


@pytest.mark.parametrize(
    ("opening", "where"),
    [
        ("cd src && apply_patch <<'EOF'", "src"),
        ("cd src/pkg/ && apply_patch <<EOF", "src/pkg"),
        ("cd ./src//pkg && applypatch <<'EOF'", "src/pkg"),
        ("cd 'my dir' && apply_patch <<'EOF'", "my dir"),
        ('cd "src/x/.." && apply_patch <<"EOF"', "src"),
    ],
)
def test_cd_dir_puts_the_paths_under_dir(opening: str, where: str) -> None:
    text = opening + "\n" + PATCH + "EOF\n"
    assert paths(text) == [
        (f"{where}/{path}", None if move is None else f"{where}/{move}") for path, move in BARE
    ]


def test_cd_dir_in_a_cat_substitution_inside_a_fence() -> None:
    text = "```sh\ncd lib && apply_patch \"$(cat <<'EOF'\n" + PATCH + 'EOF\n)"\n```\n'
    assert paths(text)[0] == ("lib/a.py", None)


def test_an_absolute_path_stays_absolute_under_cd() -> None:
    text = "cd src && apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: /r/x.py\n*** End Patch\nEOF"
    assert paths(text) == [("/r/x.py", None)]


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        (
            "```\n" + PATCH,
            "the markdown fence '```' around the patch is not closed",
            1,
        ),
        (
            "```\n" + PATCH + "```\nand also\n```\n" + PATCH + "```\n",
            "the text holds more than one patch (a second '*** Begin Patch' after the fenced one)",
            11 + 5,
        ),
        (
            "apply_patch \"$(cat <<'EOF'\n" + PATCH + "EOF\n",
            "the command substitution '\"$(cat <<...' is not closed by a line ')\"'",
            1,
        ),
        (
            "cd ../other && apply_patch <<'EOF'\n" + PATCH + "EOF\n",
            "the patch runs after 'cd ../other', outside the repository",
            1,
        ),
        (
            "cd src/../.. && apply_patch <<'EOF'\n" + PATCH + "EOF\n",
            "the patch runs after 'cd src/../..', outside the repository",
            1,
        ),
        (
            "cd ~/proj && apply_patch <<'EOF'\n" + PATCH + "EOF\n",
            "the patch runs after 'cd ~/proj', a directory the shell would expand",
            1,
        ),
        (
            "cd \"$REPO\" && apply_patch <<'EOF'\n" + PATCH + "EOF\n",
            "the patch runs after 'cd $REPO', a directory the shell would expand",
            1,
        ),
        (
            "x\n```\ncd src && apply_patch <<'EOF'\n" + PATCH + "```\n",
            "heredoc opened with 'EOF' is not closed by a line 'EOF'",
            3,
        ),
    ],
    ids=[
        "unclosed-fence",
        "two-patches",
        "unclosed-substitution",
        "cd-out",
        "cd-out-normalised",
        "cd-home",
        "cd-variable",
        "heredoc-unclosed-in-fence",
    ],
)
def test_a_broken_wrapper_is_refused_with_its_line(text: str, message: str, line: int) -> None:
    with pytest.raises(PatchSyntaxError) as info:
        parse(text)
    error = info.value
    assert error.message == f"patch line {line}: {message}"
    assert error.hint and "\n" not in error.one_line()


def test_cd_out_of_the_repository_says_how_to_send_it() -> None:
    with pytest.raises(PatchSyntaxError) as info:
        parse("cd .. && apply_patch <<'EOF'\n" + PATCH + "EOF\n")
    assert info.value.hint == (
        "send the patch without 'cd DIR &&', its paths relative to the repository root"
    )


def test_line_numbers_count_the_fence_and_the_prose() -> None:
    bad = PATCH.replace("-old", "xold")
    with pytest.raises(PatchSyntaxError) as info:
        parse("Sure.\n\n```diff\n" + bad + "```\n")
    assert info.value.message.startswith("patch line 7: hunk lines must start with")


def test_a_fence_line_inside_added_content_is_content() -> None:
    text = "*** Begin Patch\n*** Add File: README.md\n+```\n+code\n+```\n*** End Patch\n"
    (op,) = parse_codex(text).operations
    assert op.content == "```\ncode\n```\n"  # type: ignore[union-attr]
    fenced = "````\n" + text + "````\n"
    assert parse_codex(fenced).model_dump() == parse_codex(text).model_dump()


def test_a_fence_that_holds_something_else_is_not_a_patch() -> None:
    assert detect_format("```python\nprint(1)\n```\n") is None
