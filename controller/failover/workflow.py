"""``ferry failover`` and ``ferry failback``: a route's disaster recovery, run as a state machine
persisted in ZooKeeper (:mod:`controller.failover.states` lists the states and transitions).

Every phase is written to ``failover/<route>`` (:class:`controller.failover.document.FailoverDocument`)
before it runs, with a compare-and-set on the node's version, so two commands never both run one
phase, a second failover of a failed-over route is refused (:class:`controller.errors.Conflict`, with
the current state), and a command retried after its process (or the controller running it) died goes
on from the phase reached: each phase is idempotent (it reads, waits and commits offsets that are the
same the second time).

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

import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace

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
from ferry.controller.failover.document import (
    Drain,
    Failback,
    FailoverDocument,
    FailoverPlan,
    GroupPlan,
    GroupPlanRow,
    GroupPosition,
    GroupPositions,
    PartitionCopy,
    PlannedPlan,
    PlannedReport,
    Restored,
    RpoReport,
    RpoRow,
    UnplannedPlan,
    UnplannedReport,
)
from ferry.controller.failover.guard import read_state
from ferry.controller.failover.kafka_side import FailoverKafka, LastCheckpoint
from ferry.controller.groups.checkpoints import Checkpointer, GroupOffsetTranslation
from ferry.controller.lead.store import Op

log = logging.getLogger(__name__)


class FailoverRun:
    """One failover, dry run or failback command (see the module docstring)."""

    def __init__(
        self,
        *,
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

    def _write(self, doc: FailoverDocument, version: int, phase: str) -> tuple[FailoverDocument, int]:
        """Moves the node to ``phase`` (compare-and-set); returns the document written and its version."""
        try:
            fsm.check_transition(doc.state, phase)
        except fsm.TransitionRefused as exc:
            raise Conflict(f"route {doc.route}: {exc}") from None
        doc = doc.model_copy(update={"state": phase, "updated_at": self._clock()})
        data = doc.to_bytes()
        path = self._layout.failover(doc.route)
        if self._commit is not None:
            self._zk.ensure_path(self._layout.failovers)
            op = Op(OpKind.CREATE, path, data) if version < 0 else Op(OpKind.SET, path, data, version)
            try:
                self._commit([op])
            except NotLeader:
                raise
            except ControllerError:
                raise Unavailable(
                    f"route {doc.route}: another failover command changed its state meanwhile; "
                    "retry to go on from there"
                ) from None
            return doc, version + 1
        try:
            if version < 0:
                self._zk.ensure_path(self._layout.failovers)
                self._zk.create(path, data)
                return doc, 0
            return doc, int(self._zk.set(path, data, version=version).version)
        except (NodeExistsError, BadVersionError):
            raise Unavailable(
                f"route {doc.route}: another failover command changed its state meanwhile; retry to go on from there"
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
    ) -> FailoverDocument:
        """Fails the route over (or resumes a failover that stopped halfway); returns its document, with
        the report."""
        route = self.config.route(route_name)
        doc, version = self._opening(route, planned, groups, topics)
        if doc.state == fsm.ACTIVE:
            doc, version = self._write(doc, version, fsm.REQUESTED)
        self._kafka.set_topics(route, list(doc.partitions))
        if doc.state in (fsm.REQUESTED, fsm.DRAINING) and planned:
            if doc.state == fsm.REQUESTED:
                doc, version = self._write(doc, version, fsm.DRAINING)
            doc = doc.model_copy(update={"drain": self._drain(route, doc.partitions, quiet_s, timeout_s)})
        if doc.state != fsm.SYNCING:
            doc, version = self._write(doc, version, fsm.SYNCING)  # from here on, nobody copies the route
        report = self._planned_sync(route, doc) if planned else self._unplanned_sync(route, doc)
        doc = doc.model_copy(update={"report": report})
        if route.sync_acls:  # nobody copies the route any more: its producers may have the destination's WRITE
            doc, version = self._grant_acls(route, doc, version)
        doc, _ = self._write(doc, version, fsm.FAILED_OVER)
        return doc

    def _grant_acls(self, route: RouteConfig, doc: FailoverDocument, version: int) -> tuple[FailoverDocument, int]:
        """Grants the source's ACLs on the destination into the report's ``acls``; the bindings about to
        be created are written down first (``aclsGranting``), so that a failover resumed after a crash
        still counts them as its own grants (the restore revokes them). Returns the document and the
        node's version."""
        earlier = [row.binding() for row in doc.acls_granting or []]

        def write_down(lacking: list[Binding]) -> None:
            nonlocal doc, version
            granting = doc.model_copy(update={"acls_granting": acl_grant.rows({*earlier, *lacking})})
            doc, version = self._write(granting, version, fsm.SYNCING)

        acls = grant_source_acls(
            self.config,
            route,
            doc.partitions,
            self._zk,
            self._layout,
            granting=earlier,
            before_granting=write_down,
        )
        return doc.with_acls(acls), version  # the report names them now: no aclsGranting any more

    def _opening(
        self, route: RouteConfig, planned: bool, groups: str | None, topics: str | None
    ) -> tuple[FailoverDocument, int]:
        """The state a failover starts from and its node's version: a new one (still ``ACTIVE``, not
        written) for an active route, else the one in progress. Refuses a route already failed over and
        the resumption of a failover of the other kind."""
        for pattern in (groups, topics):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise BadRequest(f"{pattern!r} is not a regular expression: {exc}") from None
        doc, version = read_state(self._zk, self._layout, route.name)
        if doc.state in (fsm.FAILED_OVER, fsm.FAILING_BACK):
            raise Conflict(
                f"route {route.name} is already {doc.state}: nothing done (its report: "
                f"GET /routes/{route.name}, or ferry zk get failover/{route.name})"
            )
        if doc.state == fsm.ACTIVE:
            partitions = {
                t: n for t, n in self._route_topics(route).items() if topics is None or re.fullmatch(topics, t)
            }
            doc = FailoverDocument(
                route=route.name,
                state=fsm.ACTIVE,
                planned=planned,
                groups=groups,
                topics=topics,
                partitions=partitions,
                requested_at=self._clock(),
            )
        elif doc.planned != planned:
            raise Conflict(
                f"route {route.name} is {doc.state} in a {'planned' if doc.planned else 'unplanned'}"
                " failover: retry that one"
            )
        return doc, version

    # -- dry run ----------------------------------------------------------------------------

    def plan(
        self, route_name: str, planned: bool, groups: str | None = None, topics: str | None = None
    ) -> FailoverPlan:
        """What :meth:`failover` would do now, and nothing else: no ZooKeeper write, no commit, no record
        written (only reads). Refused as the failover would be (a route already failed over, a
        resumption of the other kind). The answer: the route's current ``state``, the ``phases`` the
        failover would go through, the ``partitions`` concerned, and in ``plan``: for a planned one what
        the route still has to copy and each group's translation now; for an unplanned one the RPO (as
        its report would give it, with what is known now) and each group's last checkpoint."""
        route = self.config.route(route_name)
        doc, _ = self._opening(route, planned, groups, topics)
        self._kafka.set_topics(route, list(doc.partitions))
        details: PlannedPlan | UnplannedPlan
        if planned:
            ends = self._kafka.log_ends(route.source, doc.partitions)
            committed = self._kafka.committed(route.source, route.group_id)
            details = PlannedPlan(
                partitions=[
                    PartitionCopy(
                        topic=key.rpartition("/")[0],
                        partition=int(key.rpartition("/")[2]),
                        source_end=end,
                        committed=committed.get(key, 0),
                        lag=max(0, end - committed.get(key, 0)),
                    )
                    for key, end in sorted(ends.items())
                ],
                groups=self._planned_groups_plan(route, doc),
            )
        else:
            details = UnplannedPlan(
                **dict(self._rpo_report(route, doc)), groups=self._unplanned_groups_plan(route, doc)
            )
        return FailoverPlan(
            route=route.name,
            source=route.source,
            destination=route.destination,
            dry_run=True,
            state=doc.state,
            planned=planned,
            phases=fsm.phases_ahead(doc.state, planned),
            groups=doc.groups,
            topics=doc.topics,
            partitions=doc.partitions,
            plan=details,
        )

    def _planned_groups_plan(self, route: RouteConfig, doc: FailoverDocument) -> list[GroupPlan]:
        out = []
        for group, found, _, wanted in self._planned_translations(route, doc):
            now = self._kafka.committed(route.destination, group)
            rows = []
            for t in found:
                key = fsm.partition_key(t.destination_topic, t.partition)
                if key not in wanted and t.topic not in doc.partitions:
                    continue
                rows.append(
                    GroupPlanRow(
                        topic=t.destination_topic,
                        partition=t.partition,
                        method=t.method,
                        source_offset=t.source_offset,
                        destination_offset=wanted.get(key),
                        committed=now.get(key),
                        lag=t.lag,
                    )
                )
            out.append(GroupPlan(group=group, partitions=rows))
        return out

    def _unplanned_groups_plan(self, route: RouteConfig, doc: FailoverDocument) -> list[GroupPlan]:
        out = []
        for group, last, current, wanted in self._unplanned_positions(route, doc):
            rows = [
                GroupPlanRow(
                    topic=key.rpartition("/")[0],
                    partition=int(key.rpartition("/")[2]),
                    method=last[key].method,
                    source_offset=last[key].source_offset,
                    destination_offset=offset,
                    committed=current.get(key),
                )
                for key, offset in sorted(wanted.items())
            ]
            out.append(GroupPlan(group=group, partitions=rows))
        return out

    def _drain(self, route: RouteConfig, partitions: dict[str, int], quiet_s: float, timeout_s: float) -> Drain:
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
                return Drain(source_ends=ends, committed=committed)
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

    def _planned_sync(self, route: RouteConfig, doc: FailoverDocument) -> PlannedReport:
        ends = self._kafka.log_ends(route.source, doc.partitions)
        committed = self._kafka.committed(route.source, route.group_id)
        lagging = fsm.behind(ends, committed)
        if lagging:
            raise Unavailable(
                f"route {route.name}: the destination misses records {lagging}: a producer wrote to the "
                "source after it was quiet; move it back and retry"
            )
        dest_ends = self._kafka.log_ends(
            route.destination, {route.destination_topic(t): n for t, n in doc.partitions.items()}
        )
        partitions = [
            PartitionCopy(
                topic=key.rpartition("/")[0],
                partition=int(key.rpartition("/")[2]),
                source_end=end,
                committed=committed.get(key, 0),
                destination_end=dest_ends.get(
                    fsm.partition_key(route.destination_topic(key.rpartition("/")[0]), int(key.rpartition("/")[2]))
                ),
                lag=0,
            )
            for key, end in sorted(ends.items())
        ]
        groups = []
        for group, _, translations, wanted in self._planned_translations(route, doc):
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
        return PlannedReport(partitions=partitions, groups=groups)

    def _planned_translations(
        self, route: RouteConfig, doc: FailoverDocument
    ) -> list[tuple[str, list[GroupOffsetTranslation], list[GroupOffsetTranslation], dict[str, int]]]:
        """Per selected group: its translations now, those of the failed-over topics made exact where the
        opposite route's map can (the checkpoints a planned sync writes), and the destination
        ``topic/partition -> offset`` it commits."""
        out = []
        for group in self._selected_groups(route, doc.groups, self._checkpointer.groups(route)):
            found = self._checkpointer.translate_group(route, group)
            wanted = {
                fsm.partition_key(t.destination_topic, t.partition): t.destination_offset
                for t in found
                if t.destination_offset is not None
            }
            translations = [self._exact_back(route, t) for t in found if t.topic in doc.partitions]
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
    ) -> GroupPositions:
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
                GroupPosition(
                    topic=key.rpartition("/")[0],
                    partition=int(key.rpartition("/")[2]),
                    source_offset=None if src is None else src[0],
                    destination_offset=offset,
                    lag=None if src is None else src[1],
                )
            )
        return GroupPositions(group=group, partitions=rows)

    def _unplanned_sync(self, route: RouteConfig, doc: FailoverDocument) -> UnplannedReport:
        rpo = self._rpo_report(route, doc)
        groups = []
        for group, _, _, wanted in self._unplanned_positions(route, doc):
            self._kafka.commit(route.destination, group, wanted)
            groups.append(self._verified(route, group, wanted))
        return UnplannedReport(**dict(rpo), groups=groups)

    def _unplanned_positions(
        self, route: RouteConfig, doc: FailoverDocument
    ) -> list[tuple[str, dict[str, LastCheckpoint], dict[str, int], dict[str, int]]]:
        """Per selected group with checkpoints: its last checkpoints, its committed offsets on the
        destination now, and the destination ``topic/partition -> offset`` an unplanned sync commits
        (the last checkpoint, only forward)."""
        checkpoints = self._kafka.last_checkpoints(route)
        dest_topics = {route.destination_topic(t) for t in doc.partitions}
        out = []
        for group in self._selected_groups(route, doc.groups, list(checkpoints)):
            current = self._kafka.committed(route.destination, group)
            wanted = {
                k: max(v.destination_offset, current.get(k, -1))
                for k, v in checkpoints[group].items()
                if k.rpartition("/")[0] in dest_topics
            }
            out.append((group, checkpoints[group], current, wanted))
        return out

    def _rpo_report(self, route: RouteConfig, doc: FailoverDocument) -> RpoReport:
        """The RPO per partition and for the route, as a range: the source log ends the leader last saw
        against what was copied (the lower bound), plus what the source probably took since at its last
        measured produce rate (the upper estimate). Reads only."""
        last = self._last_source_ends(route)
        copied, at = self._kafka.copied(route)
        for key, offset in self._kafka.copied_by_headers(route, doc.partitions).items():
            copied[key] = max(copied.get(key, 0), offset)
        wanted_topics = set(doc.partitions)
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
        return RpoReport(
            source_ends_seen_at=seen_at,
            source_unseen_s=round(unseen, 1),
            rpo=[
                RpoRow(
                    topic=r.topic,
                    partition=r.partition,
                    source_end=r.source_end,
                    copied=r.copied,
                    not_copied=r.lost,
                    not_copied_upper_estimate=r.lost_estimate,
                    produce_rate=r.rate,
                    last_copy_ms=r.last_copy_ms,
                )
                for r in rows
            ],
            not_copied=total.lower,
            not_copied_upper_estimate=total.upper,
            rpo_note=note,
        )

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

    def failback(self, route_name: str, timeout_s: float = 300.0) -> FailoverDocument:
        """Starts the reverse route's catch-up and moves the groups back; see the module docstring."""
        route = self.config.route(route_name)
        reverse = reverse_route(self.config, route)
        doc, version = read_state(self._zk, self._layout, route.name)
        if doc.state not in (fsm.FAILED_OVER, fsm.FAILING_BACK):
            raise Conflict(f"route {route.name} is {doc.state}: only a failed-over route fails back")
        if doc.state == fsm.FAILED_OVER:
            doc, version = self._write(doc, version, fsm.FAILING_BACK)
        partitions = {route.destination_topic(t): n for t, n in doc.partitions.items()}
        self._kafka.log_ends(route.source, doc.partitions)  # the old source answers, or a clear error
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
        failback = Failback(reverse_route=reverse.name, reverse_committed=committed, rpo_kept_at_source=doc.rpo())
        doc, _ = self._write(doc.model_copy(update={"failback": failback}), version, fsm.FAILING_BACK)
        return doc

    def restore(self, route_name: str) -> Restored:
        """FAILING_BACK (or FAILED_OVER) -> ACTIVE: the route copies again from where it stopped; the
        records it never copied before the outage stay only at its source (never mixed in). The ACLs its
        failover granted on the destination are revoked first, exactly those (``acls`` in the answer;
        a destination that does not answer: :class:`Unavailable`, nothing changed, retry)."""
        route = self.config.route(route_name)
        doc, version = read_state(self._zk, self._layout, route.name)
        if doc.state == fsm.ACTIVE:
            return Restored(route=doc.route, state=doc.state)
        if doc.state not in (fsm.FAILED_OVER, fsm.FAILING_BACK):
            raise Conflict(f"route {route.name} is {doc.state}: finish or retry its failover first")
        ends = self._kafka.log_ends(route.source, doc.partitions)
        # The producers are back on the source: the copy is Ferry's alone again. Before anything else, so a
        # retried restore revokes again (deleting a binding that is gone is no error).
        revoked = acl_grant.revoke_grants(self.config, route, doc.acls())
        self._kafka.commit(
            route.source, route.group_id, ends
        )  # skip what is at the source now: the RPO and copies back
        self._zk.delete(self._layout.failover(route.name), version=version)
        if revoked is None:
            return Restored(route=route.name, state=fsm.ACTIVE, resumed_at=ends)
        return Restored(route=route.name, state=fsm.ACTIVE, resumed_at=ends, acls=revoked)


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
