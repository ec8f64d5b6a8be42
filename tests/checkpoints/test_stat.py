"""The diffstat every face prints after a run and for ``/diff``: git's ``--stat`` lines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cleveragents.checkpoints import FileChange, diffstat, diffstat_totals, quote_path


def change(path: str, added: int, deleted: int, **kw: object) -> FileChange:
    status = kw.pop("status", "modified")
    return FileChange(path, status, added, deleted, bool(kw.pop("binary", False)), **kw)  # type: ignore[arg-type]


def test_small_changes_are_drawn_one_mark_per_line_as_git_draws_them() -> None:
    lines = diffstat([change("src/greet.py", 3, 1), change("notes.md", 2, 0, status="added")])
    assert lines == [
        " src/greet.py | 4 +++-",
        " notes.md     | 2 ++ (new)",
        " 2 files changed, 5 insertions(+), 1 deletion(-)",
    ]


def test_the_totals_leave_out_what_is_zero() -> None:
    assert diffstat_totals([change("a", 0, 4, status="deleted")]) == (
        "1 file changed, 4 deletions(-)"
    )
    assert diffstat_totals([change("b.png", 0, 0, binary=True)]) == "1 file changed"
    assert diffstat([]) == ["no files changed"]


def test_binary_and_uncaptured_files_show_no_graph() -> None:
    lines = diffstat([change("b.png", 0, 0, binary=True),
                      change("big.iso", 0, 0, binary=True, captured=False)])  # fmt: skip
    assert lines[0] == " b.png   | Bin"
    assert lines[1] == " big.iso | Bin (not captured)"


def test_large_changes_are_scaled_to_the_width_and_keep_both_signs() -> None:
    lines = diffstat([change("a.py", 1000, 1), change("b.py", 1, 0)], width=60)
    assert all(len(line) <= 60 for line in lines)
    graph = lines[0].split("|")[1].split()[1]
    assert graph.startswith("+")
    assert graph.endswith("-")  # the one deletion still shows
    assert lines[1] == " b.py |    1 +"


def test_a_hostile_file_name_prints_inert_and_on_one_line() -> None:
    name = "x\x1b]0;pwned\x07\n.txt"
    line = diffstat([change(name, 1, 0)])[0]
    assert not {"\x1b", "\x07", "\n"} & set(line)
    assert quote_path(name) in line
    assert quote_path(name).startswith('"')


@given(st.lists(st.tuples(st.text(min_size=1, max_size=80), st.integers(0, 10**6),
                          st.integers(0, 10**6), st.booleans()), max_size=12),
       st.integers(20, 200))  # fmt: skip
def test_any_diff_gives_one_line_per_file_and_a_total_without_control_characters(
    rows: list[tuple[str, int, int, bool]], width: int
) -> None:
    files = [change(p, 0 if b else a, 0 if b else d, binary=b) for p, a, d, b in rows]
    lines = diffstat(files, width)
    assert len(lines) == len(files) + 1 if files else len(lines) == 1
    assert not any(ch < " " or "\x7f" <= ch <= "\x9f" for line in lines for ch in line)
