"""common.tables: the CLIs' tables keep their columns and, written to a pipe, one line per row."""

from __future__ import annotations

import io

from ferry.common.tables import print_table


def test_a_piped_table_keeps_its_columns_one_line_per_row_without_colour() -> None:
    out = io.StringIO()
    long_path = "/ferry/" + "x" * 150
    print_table(
        [{"name": "src", "pid": None, "log": long_path}, {"name": "zookeeper", "pid": 42, "log": "/z"}],
        ["name", "pid", "log"],
        file=out,
    )
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["NAME", "PID", "LOG"]
    assert set(lines[1].strip()) == {"─"}
    assert lines[2].split() == ["src", "-", long_path]  # not wrapped at 80 columns
    assert lines[3].split() == ["zookeeper", "42", "/z"]
    assert len(lines) == 4 and "\x1b[" not in out.getvalue()
