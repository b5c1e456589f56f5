"""``ferry failover`` and ``ferry failback``: a route's disaster recovery, run as a state machine
persisted in ZooKeeper (:mod:`controller.failover.states` lists the states and transitions).

Every phase is written to ``failover/<route>`` before it runs, with a compare-and-set on the node's
version, so two commands never both run one phase, a second failover of a failed-over route is
refused (:class:`controller.errors.Conflict`, with the current state), and a command retried after
its process (or the controller running it) died goes on from the phase reached: each phase is
idempotent (it reads, waits and commits offsets that are the same the second time).

- **Planned** (``planned=True``): DRAINING reports what still lags, waits until no source log-end
  offset moved for ``quiet_s`` (producers stopped) and the route's committed offsets reached the
  log ends; SYNCING stops the route (the leader drops its partitions), translates and syncs every
  selected group exactly, and verifies each sits at its translated position; FAILED_OVER with the
  report: per partition the source and destination positions, 0 lag.
- **Unplanned**: the source is unreachable. SYNCING stops the route, commits every selected group's
  last checkpoint (``__ferry_checkpoints`` on the destination) and computes the RPO per partition as
  a range: the source log ends the leader last saw (``source_ends/<route>``) against what the offset
  map on the destination says was copied, and when (the lower bound); plus the last produce rate the
  leader measured times the time since its last look (the upper estimate,
  :mod:`controller.failover.states`).
- **Failback** (:func:`failback`): FAILED_OVER -> FAILING_BACK. The reverse route (destination ->
  source, declared in the config with loop prevention) copies the records written on the
  destination since; records that came from the source carry it in their provenance header and
  are never copied back. The groups are committed on the old source at their positions
  translated back. The RPO records stay where they are on the old source (see docs/runbook.md).
- **Dry run** (:meth:`FailoverRun.plan`): what a failover would do, from the same checks and the same
  reads (the groups' translations, the RPO), with no write at all: the state stays where it is.

With the route's ``sync_acls``, the step to FAILED_OVER first grants on the destination what the
source had on the route's topics and groups, WRITE included (:mod:`controller.failover.acl_grant`,
best effort), and the report says what (``acls``): exactly the bindings the destination lacked and
got. The node holds them from before they are created (``aclsGranting``, a SYNCING write), so a
failover resumed after its process died still knows them. The restore (:meth:`FailoverRun.restore`,
the producers are back on the source) revokes exactly those, from the report kept in the node,
before the route copies again: the copy is write-protected again.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core.acl_sync import Binding
from ferry.common.core.offset_map import EXACT, Segment, translate
from ferry.common.model import IdealState
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import BadRequest, Conflict, ControllerError, NotLeader, Unavailable
from ferry.controller.failover import acl_grant
from ferry.controller.failover import states as fsm
from ferry.controller.failover.acl_grant import grant_source_acls
from ferry.controller.failover.guard import read_state
from ferry.controller.failover.kafka_side import FailoverKafka, LastCheckpoint
from ferry.controller.groups.checkpoints import Checkpointer, GroupOffsetTranslation
from ferry.controller.lead.store import Op

log = logging.getLogger(__name__)


class FailoverRun:
    """One failover, dry run or failback command (see the module docstring)."""

    def __init__(
        self,
        config: FerryConfig,
        zk: KazooClient,
        layout: ZkLayout,
        client_id: str = "cli",
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        say: Callable[[str], None] = print,
        commit: Callable[[list[Op]], None] | None = None,
    ) -> None:
        """``commit``: a leader's fenced write (:meth:`controller.lead.store.Store.commit` with its fence);
        without one (the command line), plain compare-and-set writes."""
        self.config = config
        self._commit = commit
        self._zk = zk
        self._layout = layout
        self._clock = clock
        self._sleep = sleep
        self._say = say
        self._kafka = FailoverKafka(config, client_id)
        self._maps: dict[str, dict[tuple[str, int], list[Segment]]] = {}  # route -> its map, read once per run
        self._checkpointer = Checkpointer(config, f"failover-{client_id}", clock=clock)

    def close(self) -> None:
        self._kafka.close()
        self._checkpointer.close()

    # -- state ------------------------------------------------------------------------------

    def _write(self, state: dict[str, Any], version: int, phase: str) -> int:
        """Moves the node to ``phase`` (compare-and-set); returns the new version."""
        try:
            fsm.check_transition(state["state"], phase)
        except fsm.TransitionRefused as exc:
            raise Conflict(f"route {state['route']}: {exc}") from None
        state["state"] = phase
        state["updatedAt"] = self._clock()
        data = json.dumps(state).encode()
        path = self._layout.failover(state["route"])
        if self._commit is not None:
            self._zk.ensure_path(self._layout.failovers)
            op = Op(OpKind.CREATE, path, data) if version < 0 else Op(OpKind.SET, path, data, version)
            try:
                self._commit([op])
            except NotLeader:
                raise
            except ControllerError:
                raise Unavailable(
                    f"route {state['route']}: another failover command changed its state meanwhile; "
                    "retry to go on from there"
                ) from None
            return version + 1
        try:
            if version < 0:
                self._zk.ensure_path(self._layout.failovers)
                self._zk.create(path, data)
                return 0
            return int(self._zk.set(path, data, version=version).version)
        except (NodeExistsError, BadVersionError):
            raise Unavailable(
                f"route {state['route']}: another failover command changed its state meanwhile; "
                "retry to go on from there"
            ) from None

    def _route_topics(self, route: RouteConfig) -> dict[str, int]:
        out = {}
        try:
            names = self._zk.get_children(self._layout.route_topics(route.name))
        except NoNodeError:
            return {}
        for topic in names:
            try:
                out[topic] = IdealState.from_bytes(self._zk.get(self._layout.topic(route.name, topic))[0]).partitions
            except NoNodeError:
                continue
        return out

    # -- failover ---------------------------------------------------------------------------

    def failover(
        self,
        route_name: str,
        planned: bool,
        groups: str | None = None,
        topics: str | None = None,
        quiet_s: float = 5.0,
        timeout_s: float = 300.0,
    ) -> dict[str, Any]:
        """Fails the route over (or resumes a failover that stopped halfway); returns the report."""
        route = self.config.route(route_name)
        state, version = self._opening(route, planned, groups, topics)
        if state["state"] == fsm.ACTIVE:
            version = self._write(state, version, fsm.REQUESTED)
        self._kafka.set_topics(route, list(state["partitions"]))
        if state["state"] in (fsm.REQUESTED, fsm.DRAINING) and planned:
            if state["state"] == fsm.REQUESTED:
                version = self._write(state, version, fsm.DRAINING)
            state["drain"] = self._drain(route, state["partitions"], quiet_s, timeout_s)
        if state["state"] != fsm.SYNCING:
            version = self._write(state, version, fsm.SYNCING)  # from here on, nobody copies the route
        state["report"] = self._planned_sync(route, state) if planned else self._unplanned_sync(route, state)
        if route.sync_acls:  # nobody copies the route any more: its producers may have the destination's WRITE
            version = self._grant_acls(route, state, version)
        self._write(state, version, fsm.FAILED_OVER)
        return state

    def _grant_acls(self, route: RouteConfig, state: dict[str, Any], version: int) -> int:
        """Grants the source's ACLs on the destination into ``state["report"]["acls"]``; the bindings
        about to be created are written down first (``aclsGranting``), so that a failover resumed after
        a crash still counts them as its own grants (the restore revokes them). Returns the node's version."""
        earlier = [acl_grant.binding_of(row) for row in state.get("aclsGranting") or []]

        def write_down(lacking: list[Binding]) -> None:
            nonlocal version
            state["aclsGranting"] = acl_grant.rows({*earlier, *lacking})
            version = self._write(state, version, fsm.SYNCING)

        state["report"]["acls"] = grant_source_acls(
            self.config,
            route,
            state["partitions"],
            self._zk,
            self._layout,
            granting=earlier,
            before_granting=write_down,
        )
        state.pop("aclsGranting", None)  # the report names them now
        return version

    def _opening(
        self, route: RouteConfig, planned: bool, groups: str | None, topics: str | None
    ) -> tuple[dict[str, Any], int]:
        """The state a failover starts from and its node's version: a new one (still ``ACTIVE``, not
        written) for an active route, else the one in progress. Refuses a route already failed over and
        the resumption of a failover of the other kind."""
        for pattern in (groups, topics):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise BadRequest(f"{pattern!r} is not a regular expression: {exc}") from None
        state, version = read_state(self._zk, self._layout, route.name)
        if state["state"] in (fsm.FAILED_OVER, fsm.FAILING_BACK):
            raise Conflict(
                f"route {route.name} is already {state['state']}: nothing done (its report: "
                f"GET /routes/{route.name}, or ferry zk get failover/{route.name})"
            )
        if state["state"] == fsm.ACTIVE:
            partitions = {
                t: n for t, n in self._route_topics(route).items() if topics is None or re.fullmatch(topics, t)
            }
            state = {
                "route": route.name,
                "state": fsm.ACTIVE,
                "planned": planned,
                "groups": groups,
                "topics": topics,
                "partitions": partitions,
                "requestedAt": self._clock(),
            }
        elif bool(state.get("planned")) != planned:
            raise Conflict(
                f"route {route.name} is {state['state']} in a {'planned' if state.get('planned') else 'unplanned'}"
                " failover: retry that one"
            )
        return state, version

    # -- dry run ----------------------------------------------------------------------------

    def plan(
        self, route_name: str, planned: bool, groups: str | None = None, topics: str | None = None
    ) -> dict[str, Any]:
        """What :meth:`failover` would do now, and nothing else: no ZooKeeper write, no commit, no record
        written (only reads). Refused as the failover would be (a route already failed over, a
        resumption of the other kind). The answer: the route's current ``state``, the ``phases`` the
        failover would go through, the ``partitions`` concerned, and in ``plan``: for a planned one what
        the route still has to copy and each group's translation now; for an unplanned one the RPO (as
        its report would give it, with what is known now) and each group's last checkpoint."""
        route = self.config.route(route_name)
        state, _ = self._opening(route, planned, groups, topics)
        self._kafka.set_topics(route, list(state["partitions"]))
        if planned:
            ends = self._kafka.log_ends(route.source, state["partitions"])
            committed = self._kafka.committed(route.source, route.group_id)
            details: dict[str, Any] = {
                "partitions": [
                    {
                        "topic": key.rpartition("/")[0],
                        "partition": int(key.rpartition("/")[2]),
                        "sourceEnd": end,
                        "committed": committed.get(key, 0),
                        "lag": max(0, end - committed.get(key, 0)),
                    }
                    for key, end in sorted(ends.items())
                ],
                "groups": self._planned_groups_plan(route, state),
            }
        else:
            details = {**self._rpo_report(route, state), "groups": self._unplanned_groups_plan(route, state)}
        return {
            "route": route.name,
            "source": route.source,
            "destination": route.destination,
            "dryRun": True,
            "state": state["state"],
            "planned": planned,
            "phases": fsm.phases_ahead(state["state"], planned),
            "groups": state.get("groups"),
            "topics": state.get("topics"),
            "partitions": state["partitions"],
            "plan": details,
        }

    def _planned_groups_plan(self, route: RouteConfig, state: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for group, found, _, wanted in self._planned_translations(route, state):
            now = self._kafka.committed(route.destination, group)
            rows = []
            for t in found:
                key = fsm.partition_key(t.destination_topic, t.partition)
                if key not in wanted and t.topic not in state["partitions"]:
                    continue
                rows.append(
                    {
                        "topic": t.destination_topic,
                        "partition": t.partition,
                        "method": t.method,
                        "sourceOffset": t.source_offset,
                        "destinationOffset": wanted.get(key),
                        "committed": now.get(key),
                        "lag": t.lag,
                    }
                )
            out.append({"group": group, "partitions": rows})
        return out

    def _unplanned_groups_plan(self, route: RouteConfig, state: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for group, last, current, wanted in self._unplanned_positions(route, state):
            rows = [
                {
                    "topic": key.rpartition("/")[0],
                    "partition": int(key.rpartition("/")[2]),
                    "method": last[key].method,
                    "sourceOffset": last[key].source_offset,
                    "destinationOffset": offset,
                    "committed": current.get(key),
                }
                for key, offset in sorted(wanted.items())
            ]
            out.append({"group": group, "partitions": rows})
        return out

    def _drain(
        self, route: RouteConfig, partitions: dict[str, int], quiet_s: float, timeout_s: float
    ) -> dict[str, Any]:
        """Waits until the source is quiet for ``quiet_s`` and the route copied up to its log ends."""
        deadline = self._clock() + timeout_s
        ends = self._kafka.log_ends(route.source, partitions)
        quiet_since = self._clock()
        while True:
            committed = self._kafka.committed(route.source, route.group_id)
            lagging = fsm.behind(ends, committed)
            if lagging:
                self._say(
                    f"route {route.name}: still to copy: " + ", ".join(f"{k} {n}" for k, n in sorted(lagging.items()))
                )
            if not lagging and self._clock() - quiet_since >= quiet_s:
                return {"sourceEnds": ends, "committed": committed}
            if self._clock() >= deadline:
                raise Unavailable(
                    f"route {route.name}: not drained within {timeout_s:g} s (producers still writing, or "
                    f"the route lags: {lagging}); retry to go on waiting"
                )
            self._sleep(min(1.0, quiet_s / 2 or 0.5))
            now_ends = self._kafka.log_ends(route.source, partitions)
            if not fsm.quiet(ends, now_ends):
                ends, quiet_since = now_ends, self._clock()

    def _selected_groups(self, route: RouteConfig, pattern: str | None, names: list[str]) -> list[str]:
        return sorted(g for g in names if route.wants_group(g) and (pattern is None or re.fullmatch(pattern, g)))

    def _planned_sync(self, route: RouteConfig, state: dict[str, Any]) -> dict[str, Any]:
        ends = self._kafka.log_ends(route.source, state["partitions"])
        committed = self._kafka.committed(route.source, route.group_id)
        lagging = fsm.behind(ends, committed)
        if lagging:
            raise Unavailable(
                f"route {route.name}: the destination misses records {lagging}: a producer wrote to the "
                "source after it was quiet; move it back and retry"
            )
        dest_ends = self._kafka.log_ends(
            route.destination, {route.destination_topic(t): n for t, n in state["partitions"].items()}
        )
        partitions = [
            {
                "topic": key.rpartition("/")[0],
                "partition": int(key.rpartition("/")[2]),
                "sourceEnd": end,
                "committed": committed.get(key, 0),
                "destinationEnd": dest_ends.get(
                    fsm.partition_key(route.destination_topic(key.rpartition("/")[0]), int(key.rpartition("/")[2]))
                ),
                "lag": 0,
            }
            for key, end in sorted(ends.items())
        ]
        groups = []
        for group, _, translations, wanted in self._planned_translations(route, state):
            pending = [f"{t.topic}/{t.partition}" for t in translations if t.destination_offset is None]
            if pending:
                raise Unavailable(f"group {group}: no exact position yet on {pending}; retry")
            self._checkpointer.emit(route, translations)
            self._kafka.commit(route.destination, group, wanted)
            groups.append(
                self._verified(
                    route,
                    group,
                    wanted,
                    {
                        fsm.partition_key(t.destination_topic, t.partition): (t.source_offset, t.lag)
                        for t in translations
                    },
                )
            )
        return {"partitions": partitions, "groups": groups}

    def _planned_translations(
        self, route: RouteConfig, state: dict[str, Any]
    ) -> list[tuple[str, list[GroupOffsetTranslation], list[GroupOffsetTranslation], dict[str, int]]]:
        """Per selected group: its translations now, those of the failed-over topics made exact where the
        opposite route's map can (the checkpoints a planned sync writes), and the destination
        ``topic/partition -> offset`` it commits."""
        out = []
        for group in self._selected_groups(route, state.get("groups"), self._checkpointer.groups(route)):
            found = self._checkpointer.translate_group(route, group)
            wanted = {
                fsm.partition_key(t.destination_topic, t.partition): t.destination_offset
                for t in found
                if t.destination_offset is not None
            }
            translations = [self._exact_back(route, t) for t in found if t.topic in state["partitions"]]
            out.append((group, found, translations, wanted))
        return out

    def _exact_back(self, route: RouteConfig, t: GroupOffsetTranslation) -> GroupOffsetTranslation:
        """A translation the route's own map does not make exact, made exact with the map of the opposite
        route read backwards when there is one (a switch back after a failback: the group's position on
        this route's source may be among the copies the opposite route made there)."""
        if t.method == EXACT:
            return t
        opposite = next(
            (r for r in self.config.routes if r.source == route.destination and r.destination == route.source), None
        )
        if opposite is None:
            return t
        if opposite.name not in self._maps:
            self._maps[opposite.name] = self._kafka.segments(route.source, opposite.name)
        if route.name not in self._maps:
            self._maps[route.name] = self._kafka.segments(route.destination, route.name)
        back = translate_back(
            self._maps[opposite.name].get((route.destination_topic(t.topic), t.partition), []),
            self._maps[route.name].get((t.destination_topic, t.partition), []),
            t.source_offset,
        )
        if back is None:
            return t
        return replace(t, destination_offset=back, method=EXACT)

    def _verified(
        self,
        route: RouteConfig,
        group: str,
        wanted: dict[str, int],
        source: dict[str, tuple[int, int | None]] | None = None,
    ) -> dict[str, Any]:
        """The group's positions on the destination, checked against the translated ones."""
        now = self._kafka.committed(route.destination, group)
        wrong = {k: (now.get(k), v) for k, v in wanted.items() if now.get(k) != v}
        if wrong:
            raise Unavailable(
                f"group {group}: not at its translated position on {route.destination} "
                f"(now, wanted): {wrong}; is it active there? retry once it is stopped"
            )
        rows = []
        for key, offset in sorted(wanted.items()):
            src = (source or {}).get(key)
            rows.append(
                {
                    "topic": key.rpartition("/")[0],
                    "partition": int(key.rpartition("/")[2]),
                    "sourceOffset": None if src is None else src[0],
                    "destinationOffset": offset,
                    "lag": None if src is None else src[1],
                }
            )
        return {"group": group, "partitions": rows}

    def _unplanned_sync(self, route: RouteConfig, state: dict[str, Any]) -> dict[str, Any]:
        report = self._rpo_report(route, state)
        groups = []
        for group, _, _, wanted in self._unplanned_positions(route, state):
            self._kafka.commit(route.destination, group, wanted)
            groups.append(self._verified(route, group, wanted))
        return {**report, "groups": groups}

    def _unplanned_positions(
        self, route: RouteConfig, state: dict[str, Any]
    ) -> list[tuple[str, dict[str, LastCheckpoint], dict[str, int], dict[str, int]]]:
        """Per selected group with checkpoints: its last checkpoints, its committed offsets on the
        destination now, and the destination ``topic/partition -> offset`` an unplanned sync commits
        (the last checkpoint, only forward)."""
        checkpoints = self._kafka.last_checkpoints(route)
        dest_topics = {route.destination_topic(t) for t in state["partitions"]}
        out = []
        for group in self._selected_groups(route, state.get("groups"), list(checkpoints)):
            current = self._kafka.committed(route.destination, group)
            wanted = {
                k: max(v.destination_offset, current.get(k, -1))
                for k, v in checkpoints[group].items()
                if k.rpartition("/")[0] in dest_topics
            }
            out.append((group, checkpoints[group], current, wanted))
        return out

    def _rpo_report(self, route: RouteConfig, state: dict[str, Any]) -> dict[str, Any]:
        """The RPO per partition and for the route, as a range: the source log ends the leader last saw
        against what was copied (the lower bound), plus what the source probably took since at its last
        measured produce rate (the upper estimate). Reads only."""
        last = self._last_source_ends(route)
        copied, at = self._kafka.copied(route)
        for key, offset in self._kafka.copied_by_headers(route, state["partitions"]).items():
            copied[key] = max(copied.get(key, 0), offset)
        wanted_topics = set(state["partitions"])
        seen_at = None if last is None else last.at
        unseen = fsm.unseen_s(seen_at, self._clock())
        ends, rates = ({}, None) if last is None else (last.ends, last.rates)
        rows = [r for r in fsm.rpo(ends, copied, at, rates, unseen) if r.topic in wanted_topics]
        total = fsm.rpo_range(rows)
        note = total.note
        if last is None:
            note = (
                f"no source log ends the leader saw (source_ends/{route.name}): what the source holds beyond "
                "the copies is unknown"
            )
        return {
            "sourceEndsSeenAt": seen_at,
            "sourceUnseenS": round(unseen, 1),
            "rpo": [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "sourceEnd": r.source_end,
                    "copied": r.copied,
                    "notCopied": r.lost,
                    "notCopiedUpperEstimate": r.lost_estimate,
                    "produceRate": r.rate,
                    "lastCopyMs": r.last_copy_ms,
                }
                for r in rows
            ],
            "notCopied": total.lower,
            "notCopiedUpperEstimate": total.upper,
            "rpoNote": note,
        }

    def _last_source_ends(self, route: RouteConfig) -> fsm.SourceEndsPayload | None:
        path = self._layout.source_ends(route.name)
        try:
            data = self._zk.get(path)[0]
        except NoNodeError:
            return None
        try:
            return fsm.SourceEndsPayload.from_bytes(data)
        except ValueError as exc:  # a failover goes on without it: its RPO says it is unknown
            log.warning("failover: %s holds no source log ends Ferry can read: %s", path, exc)
            return None

    # -- failback ---------------------------------------------------------------------------

    def failback(self, route_name: str, timeout_s: float = 300.0) -> dict[str, Any]:
        """Starts the reverse route's catch-up and moves the groups back; see the module docstring."""
        route = self.config.route(route_name)
        reverse = reverse_route(self.config, route)
        state, version = read_state(self._zk, self._layout, route.name)
        if state["state"] not in (fsm.FAILED_OVER, fsm.FAILING_BACK):
            raise Conflict(f"route {route.name} is {state['state']}: only a failed-over route fails back")
        if state["state"] == fsm.FAILED_OVER:
            version = self._write(state, version, fsm.FAILING_BACK)
        partitions = {route.destination_topic(t): n for t, n in state["partitions"].items()}
        self._kafka.log_ends(route.source, state["partitions"])  # the old source answers, or a clear error
        deadline = self._clock() + timeout_s
        while True:  # the reverse route copies what the destination got since the failover
            ends = self._kafka.log_ends(reverse.source, partitions)
            committed = self._kafka.committed(reverse.source, reverse.group_id)
            lagging = fsm.behind(ends, committed)
            if not lagging:
                break
            self._say(
                f"route {reverse.name}: still to copy back: "
                + ", ".join(f"{k} {n}" for k, n in sorted(lagging.items()))
            )
            if self._clock() >= deadline:
                raise Unavailable(f"route {reverse.name} has not caught up within {timeout_s:g} s: {lagging}; retry")
            self._sleep(1.0)
        state["failback"] = {
            "reverseRoute": reverse.name,
            "reverseCommitted": committed,
            "rpoKeptAtSource": (state.get("report") or {}).get("rpo", []),
        }
        self._write(state, version, fsm.FAILING_BACK)
        return state

    def restore(self, route_name: str) -> dict[str, Any]:
        """FAILING_BACK (or FAILED_OVER) -> ACTIVE: the route copies again from where it stopped; the
        records it never copied before the outage stay only at its source (never mixed in). The ACLs its
        failover granted on the destination are revoked first, exactly those (``acls`` in the answer;
        a destination that does not answer: :class:`Unavailable`, nothing changed, retry)."""
        route = self.config.route(route_name)
        state, version = read_state(self._zk, self._layout, route.name)
        if state["state"] == fsm.ACTIVE:
            return state
        if state["state"] not in (fsm.FAILED_OVER, fsm.FAILING_BACK):
            raise Conflict(f"route {route.name} is {state['state']}: finish or retry its failover first")
        ends = self._kafka.log_ends(route.source, state["partitions"])
        # The producers are back on the source: the copy is Ferry's alone again. Before anything else, so a
        # retried restore revokes again (deleting a binding that is gone is no error).
        revoked = acl_grant.revoke_grants(self.config, route, (state.get("report") or {}).get("acls") or {})
        self._kafka.commit(
            route.source, route.group_id, ends
        )  # skip what is at the source now: the RPO and copies back
        self._zk.delete(self._layout.failover(route.name), version=version)
        answer: dict[str, Any] = {"route": route.name, "state": fsm.ACTIVE, "resumedAt": ends}
        if revoked is not None:
            answer["acls"] = revoked
        return answer


def reverse_route(config: FerryConfig, route: RouteConfig) -> RouteConfig:
    """The configured route destination -> source; a clear error when missing or unprotected."""
    for other in config.routes:
        if other.source == route.destination and other.destination == route.source:
            if not (other.loop_prevention and route.loop_prevention):
                raise BadRequest(
                    f"routes {route.name} and {other.name} need loop_prevention: true for a failback "
                    "(records from the source must never be copied back)"
                )
            return other
    raise BadRequest(
        f"no route {route.destination}.{route.source} in the config: declare it (loop_prevention: true, "
        "same naming, no groups) to fail back"
    )


def translate_back(forward: list[Segment], backward: list[Segment], offset: int) -> int | None:
    """A destination offset of a failed-over group, as a position on the old source: exact through the
    reverse route's map (records written on the destination since), else through the forward map read
    backwards (records that came from the source)."""
    exact = translate(backward, offset)
    if exact is not None:
        return exact
    inverse = sorted((r.dst_start, r.src_start, r.length) for s in forward for r in s.runs())  # markers: gaps
    for dst_start, src_start, length in inverse:
        if dst_start <= offset <= dst_start + length:
            return src_start + offset - dst_start
    return None
