"""Java .properties files read as java.util.Properties reads them (ferry import-mm2's input)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.mm2.properties import PropertiesError, dumps, loads


def test_separators_blanks_and_comments() -> None:
    text = (
        "# a comment\n! another\n\n   \nclusters = A, B\nA.bootstrap.servers:a:9092\nkey value with spaces\n"
        "  indented=1\nempty=\nalone\n\t tabbed \t=\t x \n"
    )
    assert loads(text) == {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:9092",
        "key": "value with spaces",
        "indented": "1",
        "empty": "",
        "alone": "",
        "tabbed": "x ",
    }


def test_continuation_lines_drop_the_next_lines_leading_blanks() -> None:
    text = "topics = a, \\\n    b, \\\n\tc\nnext = 1\n"
    assert loads(text) == {"topics": "a, b, c", "next": "1"}


def test_an_even_number_of_trailing_backslashes_does_not_continue() -> None:
    assert loads("path = C:\\\\\nnext = 1\n") == {"path": "C:\\", "next": "1"}


def test_a_comment_never_continues() -> None:
    assert loads("# a comment \\\nkey = 1\n") == {"key": "1"}


def test_a_continuation_at_the_end_of_the_file() -> None:
    assert loads("key = value\\") == {"key": "value"}


def test_escapes() -> None:
    text = "a\\=b\\:c\\ d = x\\ty\\nz\\u00e9\\\\\\q\nunicode = \\uD83D\\uDE00\n"
    assert loads(text) == {"a=b:c d": "x\ty\nzé\\q", "unicode": "\U0001f600"}


def test_crlf_and_cr_line_ends() -> None:
    assert loads("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_the_last_of_a_repeated_key_wins() -> None:
    assert loads("a=1\na=2\n") == {"a": "2"}


def test_a_malformed_unicode_escape_names_its_line() -> None:
    with pytest.raises(PropertiesError, match="line 2"):
        loads("a=1\nb=\\u12G4\n")


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(st.dictionaries(_TEXT, _TEXT, max_size=8))
def test_what_dumps_writes_loads_reads_back(properties: dict[str, str]) -> None:
    assert loads(dumps(properties)) == properties
