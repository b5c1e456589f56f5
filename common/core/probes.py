"""Liveness and readiness of workers and controllers: what their health endpoints decide, and why.

Pure: plain data in, plain data out; no I/O, no clock (the time is an argument).

Liveness answers "should a supervisor restart this process?": only when it is stuck, never because
something outside it (ZooKeeper, Kafka) is down, since a restart does not bring that back.
Readiness answers "is this process doing its part now?": a worker registered in ZooKeeper, its
session held and its newest assignment applied; a controller connected to ZooKeeper. A process
that is not live is not ready either. Each answer carries the reasons it is not, for an operator
to read (``{"reasons": [...]}`` in the endpoints' JSON).
"""

from __future__ import annotations

from dataclasses import dataclass

from ferry.common.vocabulary import ControllerState, WorkerState

# The copy loop passes every few hundred milliseconds; one pass may take longer when it releases
# partitions (a flush of up to 30 s and a commit of up to 10 s per route) or starts many at once.
# Standing still for longer than this means it is stuck.
COPY_LOOP_STALLED_AFTER_S = 120.0

ZOOKEEPER_UNREACHABLE = "zookeeper unreachable"  # the controller's /health status since its first release


@dataclass(frozen=True)
class Probe:
    """One probe's answer: passing when there is no reason against it."""

    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class WorkerFacts:
    """What a worker's probes look at, read from its copy loop and its ZooKeeper session.

    Times are the worker's clock (monotonic seconds); ``now`` comes with each decision.
    """

    state: WorkerState
    state_since: float  # when the worker entered ``state``
    loop_passed_at: float | None  # the copy loop's last pass; None before its first
    assigned_generation: int  # the newest assignment the copy loop took
    applied_generation: int | None  # the assignment it applied; None: none (or being applied again)
    zookeeper_disconnected_since: float | None  # None: connected
    session_lost: bool  # kazoo reported the session lost and the copy loop has not acted on it yet


def worker_liveness(facts: WorkerFacts, now: float, stalled_after_s: float = COPY_LOOP_STALLED_AFTER_S) -> Probe:
    """Live unless stopped or its copy loop stood still for longer than ``stalled_after_s``.

    A worker still connecting or registering (STARTING) is live: those waits are bounded and end
    the process when they give up. A draining one is live: the drain is bounded too."""
    if facts.state == WorkerState.STOPPED:
        return Probe(("stopped",))
    if facts.state not in (WorkerState.RUNNING, WorkerState.SUSPENDED):
        return Probe()
    last = facts.loop_passed_at if facts.loop_passed_at is not None else facts.state_since
    still = now - last
    if still > stalled_after_s:
        return Probe((f"the copy loop has not passed for {still:.0f} s (stuck after {stalled_after_s:.0f} s)",))
    return Probe()


def worker_readiness(facts: WorkerFacts, now: float, stalled_after_s: float = COPY_LOOP_STALLED_AFTER_S) -> Probe:
    """Ready when RUNNING (registered), connected to ZooKeeper with its session held, its newest
    assignment applied, and live."""
    reasons = list(worker_liveness(facts, now, stalled_after_s).reasons)
    state = facts.state
    if state == WorkerState.STARTING:
        reasons.append("not registered in ZooKeeper yet")
    elif state == WorkerState.SUSPENDED:
        reasons.append(
            f"ZooKeeper session lost {now - facts.state_since:.0f} s ago: "
            "exactly-once routes copy on, at-least-once routes released until registered again"
        )
    elif state == WorkerState.DRAINING:
        reasons.append("draining: leaving the fleet")
    elif state == WorkerState.RUNNING:
        if facts.session_lost:
            reasons.append("ZooKeeper session lost: releasing the partitions of at-least-once routes")
        elif facts.zookeeper_disconnected_since is not None:
            reasons.append(
                f"ZooKeeper connection lost {now - facts.zookeeper_disconnected_since:.0f} s ago: "
                "exactly-once routes copy on, at-least-once routes paused"
            )
        if facts.applied_generation is None or facts.applied_generation < facts.assigned_generation:
            applied = "none" if facts.applied_generation is None else str(facts.applied_generation)
            reasons.append(f"assignment generation {facts.assigned_generation} not applied yet (applied: {applied})")
    return Probe(tuple(reasons))


def controller_liveness(state: ControllerState, scheduler_running: bool) -> Probe:
    """Live unless stopped or its scheduler (which runs every leader job) stopped running.

    ZooKeeper being unreachable is no reason: the controller ends by itself when kazoo gives up."""
    reasons = []
    if state == ControllerState.STOPPED:
        reasons.append("stopped")
    if not scheduler_running:
        reasons.append("the scheduler is not running")
    return Probe(tuple(reasons))


def controller_readiness(state: ControllerState, scheduler_running: bool, zookeeper_connected: bool) -> Probe:
    """Ready when live and connected to ZooKeeper (a standby is ready: it answers reads and forwards writes)."""
    reasons = list(controller_liveness(state, scheduler_running).reasons)
    if not zookeeper_connected:
        reasons.insert(0, ZOOKEEPER_UNREACHABLE)
    return Probe(tuple(reasons))
