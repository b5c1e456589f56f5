"""The failover document: what ``failover/<route>`` holds in ZooKeeper, typed, and the answers of a
failover command built from the same rows (the dry run's plan, the restore).

Pure: no I/O, no clock.

:mod:`controller.failover.workflow` writes the document before each phase and reads it back to go on
from the phase reached; the leader (:mod:`controller.failover.guard`), ``GET /routes`` and
``ferry failover`` read it. As every node's payload (:mod:`common.model`), it is a pydantic model of the
JSON, field by field: :meth:`FailoverDocument.from_bytes` reads it (a node that is not what Ferry
writes fails with a ``ValueError`` naming the field), :meth:`FailoverDocument.to_bytes` writes it with
:func:`common.model.encode` (sorted keys, no spaces). Its keys are camelCase (the fields' aliases), as
Ferry has always written them and as the REST API shows them.

Read and written back across releases:

- A part is written with the fields it was read or built with, no others (``exclude_unset``): the fields
  added since Ferry 1.x (``sourceUnseenS``, ``notCopiedUpperEstimate``, ``produceRate`` and ``rpoNote``
  of the RPO, the ACL report's ``destination``, ``aclsGranting``) are optional, and a document 1.x wrote
  is, read and written again, the same JSON (1.x wrote the keys in the order it set them, with spaces).
  A ``null`` that was written stays ``null``; a field that was absent stays absent.
- Fields a newer Ferry adds are ignored (and so not written back), as in every other node.

The parts, in the order a failover writes them: the request (``route`` to ``requestedAt``), ``updatedAt``
at each phase, ``drain`` (planned), ``report`` (:class:`PlannedReport` or :class:`UnplannedReport`, its
``acls`` with the route's ``sync_acls``), ``aclsGranting`` (the bindings about to be granted, until the
report names them) and ``failback``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from ferry.common.core.acl_sync import Binding
from ferry.common.model import encode
from ferry.controller.failover import states as fsm

Number = int | float  # kept as read: an integer stays one (the same JSON back)


class DocumentPart(BaseModel):
    """A part of the document or of an answer: camelCase keys on the wire, snake_case in Python; unknown
    keys are ignored; written with the fields it was read or built with."""

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore", frozen=True
    )

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict: camelCase keys in declaration order, the fields it was read or built with."""
        out: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return out


# -- rows ------------------------------------------------------------------------------------------


class BindingRow(DocumentPart):
    """A Kafka ACL binding (:class:`common.core.acl_sync.Binding`), as the report names it."""

    resource_type: str
    name: str
    pattern: str
    principal: str
    host: str
    operation: str
    permission: str

    @classmethod
    def of(cls, binding: Binding) -> BindingRow:
        return cls(**asdict(binding))

    def binding(self) -> Binding:
        return Binding(
            resource_type=self.resource_type,
            name=self.name,
            pattern=self.pattern,
            principal=self.principal,
            host=self.host,
            operation=self.operation,
            permission=self.permission,
        )


class SkippedBinding(BindingRow):
    """A source binding with no counterpart on the destination under the route's naming, and why."""

    why: str


class PartitionCopy(DocumentPart):
    """What the route copied of one source partition: its source log end, the route's committed offset,
    and (in a planned failover's report) the destination's log end."""

    topic: str
    partition: int
    source_end: int
    committed: int
    destination_end: int | None = None  # the report's only (not the dry run's); null: not read
    lag: int


class RpoRow(DocumentPart):
    """An unplanned failover's RPO on one source partition (:class:`controller.failover.states.PartitionRpo`)."""

    topic: str
    partition: int
    source_end: int | None  # null: never seen at the source
    copied: int
    not_copied: int | None
    not_copied_upper_estimate: int | None = None  # absent from Ferry 1.x's reports
    produce_rate: Number | None = None  # records a second; absent from Ferry 1.x's reports
    last_copy_ms: int | None


class GroupPosition(DocumentPart):
    """A group's position on one destination partition, as committed and verified there."""

    topic: str
    partition: int
    source_offset: int | None
    destination_offset: int
    lag: int | None


class GroupPositions(DocumentPart):
    group: str
    partitions: list[GroupPosition]


# -- the report -------------------------------------------------------------------------------------


class AclGrants(DocumentPart):
    """The report's ``acls`` (:func:`controller.failover.acl_grant.grant_source_acls`): where the source's
    bindings came from (``source``, ``remembered`` or ``none``), those this failover granted on the
    destination (the restore revokes exactly these), how many were there already, those skipped, errors."""

    destination: str | None = None  # absent from Ferry 1.x's reports: the route's destination
    from_: str = Field("none", alias="from")
    granted: list[BindingRow] = []
    already_there: int = 0
    skipped: list[SkippedBinding] = []
    errors: list[str] = []
    remembered_at: Number | None = None  # from "remembered": when the leader's ACL sync read them


class RpoReport(DocumentPart):
    """An unplanned failover's RPO as a range (:mod:`controller.failover.states`): the source log ends the
    leader last saw and when, per partition and for the route."""

    source_ends_seen_at: Number | None
    source_unseen_s: Number | None = None  # absent from Ferry 1.x's reports
    rpo: list[RpoRow]
    not_copied: int
    not_copied_upper_estimate: int | None = None  # absent from Ferry 1.x's reports
    rpo_note: str | None = None  # absent from Ferry 1.x's reports


class UnplannedReport(RpoReport):
    """An unplanned failover's report: its RPO, each group's committed last checkpoint, and the ACLs."""

    groups: list[GroupPositions]
    acls: AclGrants | None = None


class PlannedReport(DocumentPart):
    """A planned failover's report: every partition copied to its source log end, each group at its
    translated position, and the ACLs."""

    partitions: list[PartitionCopy]
    groups: list[GroupPositions]
    acls: AclGrants | None = None


class Drain(DocumentPart):
    """A planned failover's drain: the quiet source's log ends, and the route's committed offsets then."""

    source_ends: dict[str, int]
    committed: dict[str, int]


class Failback(DocumentPart):
    """The failback's catch-up: the reverse route, its committed offsets, and the RPO left at the source."""

    reverse_route: str
    reverse_committed: dict[str, int]
    rpo_kept_at_source: list[RpoRow]


# -- the document -----------------------------------------------------------------------------------


class FailoverDocument(DocumentPart):
    """``failover/<route>``: a route's failover, its phase (``state``) and what it did. A route with no node
    is ``ACTIVE`` (:meth:`active`: ``route`` and ``state`` only)."""

    route: str
    state: str  # one of controller.failover.states.STATES
    planned: bool = False
    groups: str | None = None  # the groups' regular expression (null: every group of the route)
    topics: str | None = None  # the topics' regular expression (null: every topic)
    partitions: dict[str, int] = {}  # topic -> partitions failed over
    requested_at: Number | None = None
    updated_at: Number | None = None  # the last phase's write
    drain: Drain | None = None
    report: PlannedReport | UnplannedReport | None = None
    acls_granting: list[BindingRow] | None = None  # written down before they are granted
    failback: Failback | None = None

    @field_validator("state")
    @classmethod
    def _known_state(cls, state: str) -> str:
        if state not in fsm.STATES:
            raise ValueError(f"not a failover state: {state!r} (one of {', '.join(fsm.STATES)})")
        return state

    @classmethod
    def active(cls, route: str) -> FailoverDocument:
        """A route with no failover node."""
        return cls(route=route, state=fsm.ACTIVE)

    def to_bytes(self) -> bytes:
        return encode(self.to_json())

    @classmethod
    def from_bytes(cls, data: bytes) -> FailoverDocument:
        """The node's document. A node that is not what Ferry writes: ``ValueError``."""
        return cls.model_validate_json(data)

    def with_acls(self, acls: AclGrants) -> FailoverDocument:
        """The document with its report's ``acls``, without ``aclsGranting`` (the report names them now)."""
        if self.report is None:
            raise ValueError(f"route {self.route}: no report to put the ACLs in")
        kept = {name: getattr(self, name) for name in self.model_fields_set if name != "acls_granting"}
        return FailoverDocument(**{**kept, "report": self.report.model_copy(update={"acls": acls})})

    def acls(self) -> AclGrants | None:
        """What its failover granted on the destination (the report's ``acls``); None when nothing was."""
        return None if self.report is None else self.report.acls

    def rpo(self) -> list[RpoRow]:
        """An unplanned failover's RPO per partition; none for a planned one (or no report yet)."""
        return self.report.rpo if isinstance(self.report, UnplannedReport) else []


# -- answers built from the same rows ---------------------------------------------------------------


class GroupPlanRow(DocumentPart):
    """A dry run: where a group would be committed on one destination partition, and where it is now."""

    topic: str
    partition: int
    method: str | None
    source_offset: int | None
    destination_offset: int | None  # null: no translation yet
    committed: int | None  # the group's offset on the destination now
    lag: int | None = None  # planned only


class GroupPlan(DocumentPart):
    group: str
    partitions: list[GroupPlanRow]


class PlannedPlan(DocumentPart):
    """A planned failover's dry run: what the route still has to copy, each group's translation now."""

    partitions: list[PartitionCopy]
    groups: list[GroupPlan]


class UnplannedPlan(RpoReport):
    """An unplanned failover's dry run: its RPO with what is known now, each group's last checkpoint."""

    groups: list[GroupPlan]


class FailoverPlan(DocumentPart):
    """What a failover would do (:meth:`controller.failover.workflow.FailoverRun.plan`); nothing is written."""

    route: str
    source: str
    destination: str
    dry_run: bool
    state: str
    planned: bool
    phases: list[str]
    groups: str | None
    topics: str | None
    partitions: dict[str, int]
    plan: PlannedPlan | UnplannedPlan


class AclRevocations(DocumentPart):
    """What a restore revoked on the destination: exactly the bindings its failover granted (the errors:
    those the destination's authorizer refused to delete)."""

    destination: str
    revoked: list[BindingRow]
    errors: list[str]


class Restored(DocumentPart):
    """A restore's answer: the route is ACTIVE again, from the source's log ends then."""

    route: str
    state: str
    resumed_at: dict[str, int] | None = None  # absent when the route was ACTIVE already
    acls: AclRevocations | None = None  # absent when its failover granted nothing
