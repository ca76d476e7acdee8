"""Search hits cut around their match, the matches marked (opencrab.dashboard.snippets)."""

from __future__ import annotations

from opencrab.dashboard.snippets import ELLIPSIS, snippet


def text_of(pieces: list[tuple[str, bool]]) -> str:
    return "".join(piece for piece, _ in pieces)


def test_matches_are_marked_in_a_short_line() -> None:
    assert snippet("明日は東京へ、東京から", ["東京"]) == [
        ("明日は", False),
        ("東京", True),
        ("へ、", False),
        ("東京", True),
        ("から", False),
    ]


def test_any_case_and_the_longer_of_two_overlapping_terms() -> None:
    pieces = snippet("Tomatoes and tomato soup", ["tomato", "TOMATOES"])
    assert [p for p, hit in pieces if hit] == ["Tomatoes", "tomato"]
    assert text_of(pieces) == "Tomatoes and tomato soup"


def test_a_long_line_is_cut_around_its_first_match() -> None:
    text = "あ" * 500 + "北京" + "い" * 500
    pieces = snippet(text, ["北京"], width=60)
    assert pieces[0] == (ELLIPSIS, False)
    assert pieces[-1] == (ELLIPSIS, False)
    assert ("北京", True) in pieces
    assert len(text_of(pieces)) == 60 + 2
    before = pieces[1][0]
    assert before == "あ" * 20  # a third of the width leads up to the match


def test_a_match_near_the_end_shows_a_full_window() -> None:
    text = "x" * 300 + "end"
    pieces = snippet(text, ["end"], width=40)
    assert pieces[0] == (ELLIPSIS, False)
    assert pieces[-1] == ("end", True)
    assert len(text_of(pieces)) == 41


def test_no_match_or_no_terms_shows_the_start_as_plain_text() -> None:
    assert snippet("<b>plain</b>", []) == [("<b>plain</b>", False)]
    assert snippet("abc" * 100, ["zzz"], width=10) == [("abcabcabca", False), (ELLIPSIS, False)]
    assert snippet("a+b (c)", ["+b", "(c"]) == [
        ("a", False),
        ("+b", True),
        (" ", False),
        ("(c", True),
        (")", False),
    ]
