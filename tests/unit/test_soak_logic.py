"""The pure parts of ``ferry bench soak``: the fault table, the schedule, the verdict, the command's options."""

from __future__ import annotations

import argparse
import random
import re
from array import array
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.bench.soak import cli, schedule
from ferry.bench.soak import faults as fault_table
from ferry.bench.soak.config import fleet_config, route, soak_stack
from ferry.bench.soak.verdict import judge, judge_partition

# -- the schedule ----------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    one = schedule.plan(7, 3600, fault_table.NAMES)
    assert one == schedule.plan(7, 3600, fault_table.NAMES)
    assert one != schedule.plan(8, 3600, fault_table.NAMES)


def test_each_fault_comes_once_before_any_comes_again() -> None:
    planned = schedule.plan(3, 7200, fault_table.NAMES)
    first_round = [p.fault for p in planned[: len(fault_table.NAMES)]]
    assert sorted(first_round) == sorted(fault_table.NAMES)


@given(
    seed=st.integers(0, 2**32),
    duration_s=st.floats(0, 7200),
    faults=st.lists(st.sampled_from(fault_table.NAMES), min_size=1, unique=True),
    low=st.floats(0, 60),
    spread=st.floats(0, 60),
)
def test_faults_start_a_gap_after_the_previous_ends_and_end_before_the_quiet_tail(
    seed: int, duration_s: float, faults: list[str], low: float, spread: float
) -> None:
    planned = schedule.plan(seed, duration_s, faults, (low, low + spread), quiet_s=20.0)
    free_from = 0.0
    for fault in planned:
        assert fault.fault in faults
        assert fault.at_s >= free_from + low - 0.1
        free_from = fault.at_s + fault_table.EXPECTED_S[fault.fault]
        assert free_from <= duration_s - 20.0 + 0.1


def test_a_long_zookeeper_outage_pushes_the_next_fault_back() -> None:
    planned = schedule.plan(1, 3600, ["zookeeper"], (30, 30), expected_s={"zookeeper": 120.0})
    assert [p.at_s for p in planned[:3]] == [30.0, 180.0, 330.0]


def test_a_run_too_short_for_any_fault_has_none() -> None:
    assert schedule.plan(1, 40, fault_table.NAMES) == []


def test_fault_names_are_checked() -> None:
    assert fault_table.parse_faults(" kill,stop ") == ("kill", "stop")
    with pytest.raises(ValueError, match="unknown faults"):
        fault_table.parse_faults("kill,reboot")


class _RecordingTarget:
    """A fault target that only records which of its parts a fault ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _record(self, call: str) -> str:
        self.calls.append(call)
        return call

    def kill_worker(self) -> str:
        return self._record("kill_worker")

    def stop_worker(self) -> str:
        return self._record("stop_worker")

    def kill_leader(self) -> str:
        return self._record("kill_leader")

    def stop_zookeeper(self) -> str:
        return self._record("stop_zookeeper")

    def restart_broker(self, cluster: str) -> str:
        return self._record(f"restart_broker {cluster}")

    def add_and_remove_worker(self) -> str:
        return self._record("add_and_remove_worker")

    def move_partitions(self) -> str:
        return self._record("move_partitions")


def test_each_fault_of_the_table_runs_one_part_of_the_nemesis_of_its_own() -> None:
    target = _RecordingTarget()
    ran = {fault.name: fault.run(target) for fault in fault_table.FAULTS}
    assert len(set(fault_table.NAMES)) == len(fault_table.NAMES)
    assert len(set(ran.values())) == len(ran) == len(target.calls)
    assert ran["dst-broker"] == "restart_broker dst" and ran["src-broker"] == "restart_broker src"


def test_the_zookeeper_outage_is_expected_to_last_as_long_as_asked_for() -> None:
    lengths = fault_table.expected_lengths(300.0)
    assert lengths["zookeeper"] == 300.0 + fault_table.OUTAGE_MARGIN_S
    assert {name: s for name, s in lengths.items() if name != "zookeeper"} == {
        name: s for name, s in fault_table.EXPECTED_S.items() if name != "zookeeper"
    }


def test_the_command_draws_the_faults_on_by_default_and_names_each_in_its_help() -> None:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["soak"])
    assert args.faults == fault_table.DEFAULT
    assert all(fault.does in fault_table.help_text() for fault in fault_table.FAULTS)


def test_the_benchmarks_page_describes_exactly_the_soaks_faults_in_the_tables_order() -> None:
    text = (Path(__file__).resolve().parents[2] / "BENCHMARKS.md").read_text()
    table = text.split("| fault | what | how long |", 1)[1].split("\n\n", 1)[0]
    assert tuple(re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE)) == fault_table.NAMES


# -- the verdict -----------------------------------------------------------------------------


def test_a_faithful_copy_has_nothing_lost_duplicated_or_disordered() -> None:
    verdict = judge({0: ["1", "2"], 1: ["3"]}, {0: ["1", "2"], 1: ["3"]})
    assert (verdict.lost, verdict.duplicated, verdict.disordered, verdict.unacknowledged) == (0, 0, [], 0)


def test_missing_records_are_lost_and_extra_copies_duplicated() -> None:
    row = judge_partition(0, ["a", "b", "c", "d"], ["a", "b", "b", "b", "d"])
    assert (row.lost, row.duplicated, row.disordered) == (1, 2, False)


def test_a_replayed_range_is_duplicated_not_disordered() -> None:
    row = judge_partition(0, ["1", "2", "3", "4"], ["1", "2", "3", "2", "3", "4"])
    assert (row.lost, row.duplicated, row.disordered) == (0, 2, False)


def test_first_copies_out_of_source_order_are_disordered() -> None:
    row = judge_partition(0, ["1", "2", "3"], ["1", "3", "2"])
    assert (row.lost, row.duplicated, row.disordered) == (0, 0, True)


def test_the_verdict_takes_the_streams_integer_arrays() -> None:
    verdict = judge({0: array("q", [5, 6, 7])}, {0: array("q", [5, 7, 7, -1])})
    assert (verdict.lost, verdict.duplicated, verdict.disordered, verdict.unacknowledged) == (1, 1, [], 1)


def test_values_the_source_never_acknowledged_are_counted_apart() -> None:
    verdict = judge({0: ["1"]}, {0: ["1", "x"], 2: ["y"]})
    assert (verdict.lost, verdict.duplicated, verdict.unacknowledged) == (0, 0, 2)
    assert [p.partition for p in verdict.partitions] == [0, 2]


@given(
    produced=st.lists(st.integers(0, 10_000), unique=True, max_size=60),
    seed=st.integers(0, 2**32),
    data=st.data(),
)
def test_a_shuffled_stream_with_duplicates_and_losses_is_judged_exactly(
    produced: list[int], seed: int, data: st.DataObject
) -> None:
    values = [str(v) for v in produced]
    kept = [v for v in values if data.draw(st.booleans())]
    extra = [data.draw(st.sampled_from(kept)) for _ in range(data.draw(st.integers(0, 10)))] if kept else []
    read = kept + extra
    random.Random(seed).shuffle(read)
    row = judge_partition(0, values, read)
    assert row.lost == len(values) - len(kept)
    assert row.duplicated == len(extra)
    assert row.read == len(read) and row.unacknowledged == 0
    first_copies = list(dict.fromkeys(read))
    assert row.disordered == (first_copies != [v for v in values if v in set(kept)])


@given(st.lists(st.integers(0, 10_000), unique=True, max_size=60), st.integers(0, 60), st.integers(1, 20))
def test_replaying_any_suffix_in_order_never_looks_disordered(produced: list[int], start: int, length: int) -> None:
    values = [str(v) for v in produced]
    read = values + values[start : start + length]
    row = judge_partition(0, values, read)
    assert (row.lost, row.disordered) == (0, False)
    assert row.duplicated == len(values[start : start + length])


# -- the route and the options ---------------------------------------------------------------


def test_the_route_takes_route_options_last() -> None:
    assert route("t", 3, {"delivery_guarantee": "exactly_once", "replication_factor": 1}) == {
        "source": "src",
        "destination": "dst",
        "include": ["t"],
        "replication_factor": 1,
        "delivery_guarantee": "exactly_once",
    }


def test_the_fleet_config_uses_the_soaks_own_stack() -> None:
    stack = soak_stack(dst_brokers=3)
    config = fleet_config(stack, "/ferry-soak-x", "t", 6.0, {})
    assert config["zookeeper"] == {"connect": "127.0.0.1:31600", "root": "/ferry-soak-x", "session_timeout_s": 6.0}
    assert config["clusters"]["dst"]["bootstrap.servers"] == "127.0.0.1:31622,127.0.0.1:31625,127.0.0.1:31628"
    assert config["routes"][0]["replication_factor"] == 3
    assert {s.port for s in stack.servers}.isdisjoint({2181, 19092, 29092})


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    return parser.parse_args(["soak", *argv])


def test_the_soak_command_parses_its_options() -> None:
    args = _parse(
        "--minutes",
        "3",
        "--faults",
        "kill,zookeeper",
        "--gap",
        "10-20",
        "--route-option",
        "delivery_guarantee=exactly_once",
        "--route-option",
        "replication_factor=2",
    )
    assert (args.minutes, args.faults, args.gap) == (3.0, ("kill", "zookeeper"), (10.0, 20.0))
    assert dict(args.route_option) == {"delivery_guarantee": "exactly_once", "replication_factor": 2}


@pytest.mark.parametrize(
    "argv", [["--faults", "reboot"], ["--gap", "20-10"], ["--gap", "x"], ["--route-option", "novalue"]]
)
def test_the_soak_command_refuses_bad_options(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        _parse(*argv)
