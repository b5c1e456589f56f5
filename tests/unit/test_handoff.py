from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.common.core.handoff import worker_assignments
from ferry.common.model import PartitionKey, PartitionState, PartitionStatus, WorkerStatus

P = [PartitionKey("src.dst", "t", i) for i in range(4)]


def status(**parts: str) -> WorkerStatus:
    return WorkerStatus(generation=1, partitions={P[int(k[1:])]: PartitionStatus(v) for k, v in parts.items()})


def test_a_partition_moves_only_after_the_live_holder_released_it() -> None:
    ideal = {P[0]: "w2", P[1]: "w1"}
    statuses = {"w1": status(p0=PartitionState.ONLINE, p1=PartitionState.ONLINE)}
    step1 = worker_assignments(ideal, statuses, live={"w1", "w2"})
    assert step1 == {"w2": frozenset(), "w1": frozenset({P[1]})}

    released = {"w1": status(p0=PartitionState.OFFLINE, p1=PartitionState.ONLINE)}
    step2 = worker_assignments(ideal, released, live={"w1", "w2"})
    assert step2 == {"w2": frozenset({P[0]}), "w1": frozenset({P[1]})}


def test_a_dead_holder_does_not_block_the_move() -> None:
    ideal = {P[0]: "w2"}
    statuses = {"w1": status(p0=PartitionState.ONLINE)}
    assert worker_assignments(ideal, statuses, live={"w2"}) == {"w2": frozenset({P[0]})}


def test_an_error_partition_must_be_released_too() -> None:
    ideal = {P[0]: "w2"}
    statuses = {"w1": status(p0=PartitionState.ERROR)}
    assert worker_assignments(ideal, statuses, live={"w1", "w2"}) == {"w2": frozenset()}


@given(
    ideal=st.dictionaries(st.sampled_from(P), st.sampled_from(["w1", "w2", "w3"])),
    held=st.dictionaries(
        st.sampled_from(["w1", "w2", "w3"]),
        st.dictionaries(
            st.sampled_from(P), st.sampled_from([PartitionState.ONLINE, PartitionState.OFFLINE, PartitionState.ERROR])
        ),
    ),
    live=st.sets(st.sampled_from(["w1", "w2", "w3"])),
)
def test_no_partition_is_ever_copied_by_two_live_workers(
    ideal: dict[PartitionKey, str], held: dict[str, dict[PartitionKey, str]], live: set[str]
) -> None:
    statuses = {w: WorkerStatus(1, {p: PartitionStatus(s) for p, s in parts.items()}) for w, parts in held.items()}
    assigned = worker_assignments(ideal, statuses, live)
    for partition in P:
        # live workers that will copy it: the one assigned it, plus live holders not yet released
        copying = {w for w, ps in assigned.items() if partition in ps and w in live}
        still_holding = {
            w
            for w in live
            if statuses.get(w)
            and partition in statuses[w].partitions
            and statuses[w].partitions[partition].state != PartitionState.OFFLINE
            and w != ideal.get(partition)
        }
        assert not (copying and still_holding)
        # every partition ends up assigned to its ideal worker once nobody else holds it
        if not still_holding and partition in ideal:
            assert partition in assigned[ideal[partition]]
