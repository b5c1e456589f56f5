"""The leader's schema distributor: primary registry -> target registries, same schema IDs.

One pass (:meth:`SchemaDistributor.run`), every ``schemas.interval_s`` on the leader and on
``POST /schemas/sync``:

1. read the primary: its subjects (those that fit the primary's ``subject_format`` and
   ``schemas.include``), their live versions, each version's ID and content;
2. read each target: the translated subjects' versions, and for every ID still to copy, what
   the target holds under that ID;
3. plan (:func:`common.core.schemas.plan`, pure): copies in version order; an ID or version the
   target holds for something else is a conflict, reported and never written;
   A target that cannot be reached is left out of the pass (``unreachable`` in the report,
   ``ferry_controller_schema_target_up`` 0); the others go on. The primary unreachable fails it.
4. export the primary once; an ID that is free on a target whose registry already holds the
   same schema under another ID is a conflict too (Apicurio keeps one ID per content and would
   import nothing); import into each target only its copies (Apicurio keeps their IDs),
   then read every copied version back: a version that did not land with its ID and content is
   reported as a conflict too (nothing silent).

No state of its own: the registries are the state, so a pass after a restart or a change of
leader finds what was copied and copies only the rest. Passes never overlap (one lock).
A pass answers with data (:class:`SchemaReport`; :meth:`SchemaDistributor.status` adds the last
error, :class:`SchemaStatus`); :mod:`controller.api.rest_json` shapes ``GET /schemas``' JSON.

Soft deletes follow the primary; hard deletes do not. A soft delete (Confluent-compatible
``DELETE`` without ``permanent``) makes Apicurio disable the version (state ``DISABLED``; the ID
keeps resolving): the distributor reads every version's state (Apicurio's own API) and gives the
copies on targets the same state (re-enabling follows too). A hard delete removes the version
(and its content once unused, so the ID stops resolving): the copies on targets stay, so
records mirrored with that ID stay readable there; deleting them is the operator's decision.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge

from ferry.common.config import SchemasConfig
from ferry.common.core.schemas import (
    HELD_UNDER_ANOTHER_ID,
    ConflictReport,
    Copy,
    Plan,
    RenameTopic,
    SchemaVersion,
    StateChange,
    SubjectFormat,
    SubjectStatus,
    TargetState,
    fingerprint,
    identity,
    ids_to_check,
    plan,
    translate_subject,
)
from ferry.controller.schemas.registry import (
    RegistryClient,
    RegistryUnavailable,
    VersionCopy,
    content_hashes,
    import_zip_for,
)

log = logging.getLogger(__name__)

ENABLED = "ENABLED"  # a version's state when the registry names none


@dataclass(frozen=True)
class SubjectReport:
    """One primary subject: its versions (sorted) with their states, and its status on each reachable target."""

    subject: str
    versions: list[SchemaVersion]
    states: dict[int, str]  # version -> ENABLED | DISABLED | DEPRECATED
    targets: dict[str, SubjectStatus]

    @property
    def latest(self) -> SchemaVersion:
        return self.versions[-1]


@dataclass(frozen=True)
class SchemaReport:
    """What one pass found and did. ``conflicts``: the plan's and the copies that did not land."""

    primary: str
    targets: list[str]
    checked_at: float
    subjects: list[SubjectReport]
    in_sync: bool  # every subject in sync on every target, no failed copy, no unreachable target
    out_of_sync: dict[str, int]  # target -> subjects not (yet) in sync there
    conflicts: list[ConflictReport]
    copied: list[Copy]
    state_changed: list[StateChange]
    unreachable: dict[str, str]  # target -> why this pass left it out


class SchemaStatus(NamedTuple):
    """The last successful pass's report, and why a later pass failed (None: it did not)."""

    report: SchemaReport
    last_error: str | None


class SchemaDistributor:
    """See the module docstring. ``run`` and ``status`` may be called from any thread."""

    def __init__(
        self,
        *,
        config: SchemasConfig,
        metrics: CollectorRegistry,
        clients: Mapping[str, RegistryClient] | None = None,
        rename_topic: RenameTopic = identity,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.targets = config.target_names
        self._clients = (
            dict(clients)
            if clients is not None
            else {
                name: RegistryClient(name=name, config=config.registries[name])
                for name in [config.primary, *self.targets]
            }
        )
        self._formats = {
            name: SubjectFormat(reg.subject_format, reg.subject_vars) for name, reg in config.registries.items()
        }
        self._rename_topic = rename_topic
        self._clock = clock
        self._lock = threading.Lock()
        self._last: SchemaReport | None = None
        self._logged_conflicts: set[str] = set()
        self._last_error: str | None = None
        # A primary (subject, version) never changes its ID or content: read it once.
        self._primary_cache: dict[tuple[str, int], SchemaVersion] = {}
        self._out_of_sync = Gauge(
            "ferry_controller_schema_subjects_out_of_sync",
            "Primary subjects not (yet) in sync on the target registry",
            ["target"],
            registry=metrics,
        )
        self._conflicts = Gauge(
            "ferry_controller_schema_conflicts",
            "Subject versions that cannot keep their schema ID on the target",
            ["target"],
            registry=metrics,
        )
        self._copied = Counter(
            "ferry_controller_schema_versions_copied",
            "Subject versions copied to the target registry with their IDs",
            ["target"],
            registry=metrics,
        )
        self._failures = Counter(
            "ferry_controller_schema_pass_failures",
            "Distribution passes that failed or skipped a target (a registry unreachable)",
            registry=metrics,
        )
        self._target_up = Gauge(
            "ferry_controller_schema_target_up",
            "1 when the last pass reached the target registry",
            ["target"],
            registry=metrics,
        )

    def close(self) -> None:
        for client in self._clients.values():
            client.close()

    def translate(self, subject: str, target: str) -> str | None:
        return translate_subject(subject, self._formats[self.config.primary], self._formats[target], self._rename_topic)

    # -- one pass ----------------------------------------------------------------------------

    def run(self, write: bool = True) -> SchemaReport:
        """One pass (copies only when ``write``); returns the report ``GET /schemas`` serves."""
        with self._lock:
            try:
                report = self._pass(write)
            except Exception as exc:
                self._failures.inc()
                self._last_error = f"{self._clock():.0f}: {exc}"
                raise
            self._last, self._last_error = report, None
            return report

    def status(self) -> SchemaStatus:
        """The last successful pass's report, with the error when a later pass failed (a
        registry unreachable); a read-only pass when none succeeded yet."""
        last = self._last
        if last is None:
            return SchemaStatus(self.run(write=False), None)
        return SchemaStatus(last, self._last_error)

    def _read_primary(self) -> tuple[dict[str, list[SchemaVersion]], dict[tuple[str, int], str]]:
        primary = self._clients[self.config.primary]
        primary_format = self._formats[self.config.primary]
        found: dict[str, list[SchemaVersion]] = {}
        states: dict[tuple[str, int], str] = {}
        for subject in primary.subjects():
            if primary_format.topic(subject) is None or not self.config.wants(subject):
                continue
            states.update({(subject, number): state for number, state in primary.states(subject).items()})
            versions: list[SchemaVersion] = []
            for number in primary.versions(subject):
                cached = self._primary_cache.get((subject, number))
                if cached is None:
                    registered = primary.version(subject, number)
                    if registered is None:  # deleted meanwhile
                        continue
                    cached = SchemaVersion(
                        subject, number, registered.schema_id, fingerprint(registered.schema, registered.schema_type)
                    )
                    self._primary_cache[(subject, number)] = cached
                versions.append(cached)
            if versions:
                found[subject] = versions
        return found, states

    def _read_target(
        self, target: str, subjects: list[str], states: dict[tuple[str, int], str]
    ) -> dict[str, dict[int, tuple[int, str]]]:
        client = self._clients[target]
        held: dict[str, dict[int, tuple[int, str]]] = {}
        for subject in subjects:
            target_subject = self.translate(subject, target)
            if target_subject is None:
                continue
            numbers = client.versions(target_subject)
            if numbers:
                states.update({(target_subject, n): state for n, state in client.states(target_subject).items()})
            for number in numbers:
                registered = client.version(target_subject, number)
                if registered is not None:
                    held.setdefault(target_subject, {})[number] = (
                        registered.schema_id,
                        fingerprint(registered.schema, registered.schema_type),
                    )
        return held

    def _read_ids(self, target: str, ids: set[int]) -> dict[int, str | None]:
        client = self._clients[target]
        found: dict[int, str | None] = {}
        for schema_id in sorted(ids):
            there = client.schema_by_id(schema_id)
            found[schema_id] = None if there is None else fingerprint(*there)
        return found

    def _pass(self, write: bool) -> SchemaReport:
        primary, primary_states = self._read_primary()  # the primary unreachable: the pass fails
        # A target that cannot be reached is left out of this pass; the others go on.
        unreachable: dict[str, str] = {}
        target_states: dict[str, dict[tuple[str, int], str]] = {target: {} for target in self.targets}
        held: dict[str, dict[str, dict[int, tuple[int, str]]]] = {}
        ids: dict[str, dict[int, str | None]] = {}
        for target in self.targets:
            try:
                held[target] = self._read_target(target, sorted(primary), target_states[target])
                wanted = ids_to_check(primary, [target], held, self.translate)
                ids[target] = self._read_ids(target, wanted[target])
            except RegistryUnavailable as exc:
                unreachable[target] = str(exc)
        reachable = [target for target in self.targets if target not in unreachable]

        def planned() -> Plan:
            return plan(primary, reachable, held, ids, self.translate, primary_states, target_states)

        result = planned()
        self._log_conflicts({conflict.reason for conflict in result.conflicts})
        copied: list[Copy] = []
        failed: list[ConflictReport] = []
        if write and result.copies:
            export = self._clients[self.config.primary].export_zip()
            if self._mark_held_elsewhere(export, result.copies, ids):
                result = planned()
                self._log_conflicts({conflict.reason for conflict in result.conflicts})
            copied, failed = self._copy(export, primary, result.copies, unreachable)
            for copy in copied:  # what is now on the target, without reading it all again
                version = next(v for v in primary[copy.subject] if v.version == copy.version)
                held[copy.target].setdefault(copy.target_subject, {})[copy.version] = (
                    copy.schema_id,
                    version.fingerprint,
                )
                ids[copy.target][copy.schema_id] = version.fingerprint
        changed: list[StateChange] = []
        if write:
            for change in result.state_changes:  # copies made just now came with the primary's state
                if change.target in unreachable:
                    continue
                try:
                    self._clients[change.target].set_state(change.target_subject, change.version, change.state)
                except RegistryUnavailable as exc:
                    unreachable[change.target] = str(exc)
                    continue
                target_states[change.target][(change.target_subject, change.version)] = change.state
                changed.append(change)
                log.info(
                    "schema state follows the primary: %s version %d on %s is %s",
                    change.target_subject,
                    change.version,
                    change.target,
                    change.state,
                )
        if copied or changed:
            result = planned()
        for target in self.targets:
            self._target_up.labels(target).set(0 if target in unreachable else 1)
        if unreachable:
            self._failures.inc()
            log.warning("schema distribution skipped unreachable targets: %s", "; ".join(unreachable.values()))
        report = self._report(primary, primary_states, result, copied, failed, changed, unreachable)
        return replace(report, unreachable=unreachable, in_sync=report.in_sync and not unreachable)

    def _log_conflicts(self, reasons: set[str]) -> None:
        """Each conflict at ERROR once when it appears (not every pass), and when it is gone."""
        for reason in sorted(reasons - self._logged_conflicts):
            log.error("schema conflict (not written; GET /schemas lists it): %s", reason)
        for reason in sorted(self._logged_conflicts - reasons):
            log.info("schema conflict resolved: %s", reason)
        self._logged_conflicts = set(reasons)

    def _mark_held_elsewhere(self, export: bytes, copies: list[Copy], ids: dict[str, dict[int, str | None]]) -> bool:
        """Marks the free IDs whose schema the target already holds under another ID: Apicurio
        would answer the import with 204 and import nothing. True when it marked any."""
        hashes = content_hashes(export)
        marked = False
        for copy in copies:
            content_hash = hashes.get((copy.subject, copy.version))
            if (
                ids[copy.target].get(copy.schema_id) is None
                and content_hash is not None
                and self._clients[copy.target].has_content(content_hash)
            ):
                ids[copy.target][copy.schema_id] = HELD_UNDER_ANOTHER_ID
                marked = True
        return marked

    def _copy(
        self, export: bytes, primary: Mapping[str, list[SchemaVersion]], copies: list[Copy], unreachable: dict[str, str]
    ) -> tuple[list[Copy], list[ConflictReport]]:
        copied: list[Copy] = []
        failed: list[ConflictReport] = []
        batch = self.config.import_batch
        for target in self.targets:
            mine = [c for c in copies if c.target == target]
            client = self._clients[target]
            stopped: set[str] = set()  # subjects with a version that did not land: later ones wait
            for start in range(0, len(mine), batch):
                chunk = [c for c in mine[start : start + batch] if c.subject not in stopped]
                if not chunk:
                    continue
                try:
                    client.import_zip(
                        import_zip_for(export, [VersionCopy(c.subject, c.version, c.target_subject) for c in chunk])
                    )
                    problems = [self._landed(client, primary, copy) for copy in chunk]
                except RegistryUnavailable as exc:  # this target's rest waits for the next pass
                    unreachable[target] = str(exc)
                    break
                for copy, problem in zip(chunk, problems, strict=True):  # read back: an import can
                    # answer 204 and not have done it
                    if problem is None:
                        copied.append(copy)
                        self._copied.labels(target).inc()
                        log.info(
                            "schema copied: %s version %d -> %s %s, ID %d",
                            copy.subject,
                            copy.version,
                            target,
                            copy.target_subject,
                            copy.schema_id,
                        )
                        continue
                    stopped.add(copy.subject)
                    log.error("schema copy failed: %s", problem)
                    failed.append(
                        ConflictReport(target, copy.subject, copy.version, copy.schema_id, copy.target_subject, problem)
                    )
        return copied, failed

    @staticmethod
    def _landed(client: RegistryClient, primary: Mapping[str, list[SchemaVersion]], copy: Copy) -> str | None:
        """None when ``copy`` is on the target with its ID and content; else what is wrong."""
        expected = next(v for v in primary[copy.subject] if v.version == copy.version)
        landed = client.version(copy.target_subject, copy.version)
        landed_as = None if landed is None else (landed.schema_id, fingerprint(landed.schema, landed.schema_type))
        if landed_as == (copy.schema_id, expected.fingerprint):
            return None
        return (
            f"{copy.subject} version {copy.version} did not land on {client.name} as "
            f"{copy.target_subject} with ID {copy.schema_id}: "
            + (
                "nothing was imported"
                if landed is None
                else f"it holds ID {landed.schema_id}"
                + ("" if landed_as and landed_as[1] == expected.fingerprint else " with other content")
            )
        )

    def _report(
        self,
        primary: Mapping[str, list[SchemaVersion]],
        primary_states: Mapping[tuple[str, int], str],
        result: Plan,
        copied: list[Copy],
        failed: list[ConflictReport],
        changed: list[StateChange],
        unreachable: Mapping[str, str],
    ) -> SchemaReport:
        out_of_sync: dict[str, int] = {}
        for target in self.targets:
            if target in unreachable:  # not known to be in sync: every subject it should hold
                out_of_sync[target] = sum(1 for subject in primary if self.translate(subject, target) is not None)
                self._out_of_sync.labels(target).set(out_of_sync[target])
                continue  # its conflicts are as the last pass that reached it found them
            out_of_sync[target] = result.out_of_sync(target)
            self._out_of_sync.labels(target).set(out_of_sync[target])
            self._conflicts.labels(target).set(
                result.conflicts_on(target) + sum(1 for f in failed if f.target == target)
            )
        subjects = []
        for subject in sorted(primary):
            versions = sorted(primary[subject])
            subjects.append(
                SubjectReport(
                    subject,
                    versions,
                    {v.version: primary_states.get((subject, v.version), ENABLED) for v in versions},
                    dict(result.statuses.get(subject, {})),
                )
            )
        return SchemaReport(
            primary=self.config.primary,
            targets=list(self.targets),
            checked_at=self._clock(),
            subjects=subjects,
            in_sync=all(s.state == TargetState.IN_SYNC for per in result.statuses.values() for s in per.values())
            and not failed,
            out_of_sync=out_of_sync,
            conflicts=[*result.conflicts, *failed],
            copied=copied,
            state_changed=changed,
            unreachable={},
        )
