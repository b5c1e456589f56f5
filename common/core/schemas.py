"""Schema distribution's pure core: subject translation and the distribution plan (no I/O, no clock).

The leader's schema distributor (``controller/schemas/distributor.py``) follows one *primary*
registry and copies every subject version to each *target* registry under the target's subject
name, keeping the schema ID (records carry it in their payload, Confluent wire format).

Subject translation: each cluster names subjects with a format such as ``"{topic}-value"`` or
``"{tenant}-{env}-{topic}-value"`` (its variables fixed per cluster). A primary subject is parsed
back to its topic with the primary's format, the topic goes through ``rename_topic`` (identity:
subjects follow the source topic's name, also on routes that rename topics; records decode by
their IDs, the same on every registry), and the target's format renders the target subject. A subject that does not
fit the primary's format is not distributed.

States of one (subject, target), computed afresh each run from what both registries hold::

    PENDING  --every version copied, same IDs-->            IN_SYNC
    PENDING  --an ID or version taken there by another-->   CONFLICT (reported, never overwritten;
                                                             later versions wait behind it)
    IN_SYNC  --a new version on the primary-->              PENDING
    IN_SYNC  --a version's state changed on the primary-->  IN_SYNC, the copy's state follows
             (a soft delete disables a version; the ID keeps resolving)
    CONFLICT --the operator freed the ID or version-->      PENDING / IN_SYNC

Nothing is remembered between runs: the registries are the state, so a restart (or a new
leader) neither copies a version twice nor forgets one.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

RenameTopic = Callable[[str], str]
# Kafka's topic name characters: what {topic} may match inside a subject.
_TOPIC_CHARS = r"[A-Za-z0-9._-]+"
_FIELD = re.compile(r"\{([^{}]*)\}")


def identity(topic: str) -> str:
    return topic


@dataclass(frozen=True)
class SubjectFormat:
    """``template`` with ``{topic}`` once and other ``{names}`` from ``variables``."""

    template: str
    variables: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = _FIELD.findall(self.template)
        if names.count("topic") != 1:
            raise ValueError(f"subject format {self.template!r} must contain {{topic}} exactly once")
        missing = sorted({n for n in names if n != "topic" and n not in self.variables})
        if missing:
            raise ValueError(f"subject format {self.template!r} names {missing}, which subject_vars does not define")

    def subject(self, topic: str) -> str:
        """The subject of ``topic`` on this cluster."""
        return _FIELD.sub(lambda m: topic if m.group(1) == "topic" else self.variables[m.group(1)], self.template)

    def topic(self, subject: str) -> str | None:
        """The topic ``subject`` names under this format, or None when it does not fit."""
        pattern = "".join(
            (f"({_TOPIC_CHARS})" if name == "topic" else re.escape(self.variables[name]))
            if is_field
            else re.escape(text)
            for is_field, text, name in _parts(self.template)
        )
        match = re.fullmatch(pattern, subject)
        return match.group(1) if match else None


def _parts(template: str) -> Iterable[tuple[bool, str, str]]:
    """(is a field, literal text, field name) pieces of a template, in order."""
    position = 0
    for match in _FIELD.finditer(template):
        if match.start() > position:
            yield False, template[position : match.start()], ""
        yield True, "", match.group(1)
        position = match.end()
    if position < len(template):
        yield False, template[position:], ""


def translate_subject(
    subject: str, primary: SubjectFormat, target: SubjectFormat, rename_topic: RenameTopic = identity
) -> str | None:
    """The target's subject for the primary's ``subject``, or None when it does not fit the primary's format."""
    topic = primary.topic(subject)
    if topic is None:
        return None
    return target.subject(rename_topic(topic))


def fingerprint(schema: str, schema_type: str | None = "AVRO") -> str:
    """What makes two registrations the same schema: the type and the content, JSON-normalised
    (key order and whitespace do not matter) for Avro and JSON Schema, stripped text otherwise."""
    kind = (schema_type or "AVRO").upper()
    text = schema.strip()
    if kind in ("AVRO", "JSON"):
        with contextlib.suppress(ValueError):
            text = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{kind}\n{text}".encode()).hexdigest()[:32]


@dataclass(frozen=True, order=True)
class SchemaVersion:
    """One registered version of a subject: its schema ID and content fingerprint."""

    subject: str
    version: int
    schema_id: int
    fingerprint: str


class TargetState(str, enum.Enum):
    IN_SYNC = "in_sync"
    PENDING = "pending"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Copy:
    """Copy ``subject`` version ``version`` (ID ``schema_id``) to ``target`` as ``target_subject``."""

    target: str
    subject: str
    version: int
    schema_id: int
    target_subject: str


@dataclass(frozen=True)
class StateChange:
    """Give the copy of ``subject`` version ``version`` on ``target`` the primary's ``state``
    (ENABLED, DISABLED: soft-deleted, DEPRECATED)."""

    target: str
    subject: str
    version: int
    target_subject: str
    state: str


@dataclass(frozen=True)
class ConflictReport:
    target: str
    subject: str
    version: int
    schema_id: int
    target_subject: str
    reason: str


@dataclass(frozen=True)
class SubjectStatus:
    """One subject on one target."""

    target: str
    target_subject: str
    state: TargetState
    synced_versions: tuple[int, ...]
    missing_versions: tuple[int, ...]
    conflict: str | None = None


@dataclass
class Plan:
    copies: list[Copy] = field(default_factory=list)
    conflicts: list[ConflictReport] = field(default_factory=list)
    state_changes: list[StateChange] = field(default_factory=list)
    # primary subject -> target -> status
    statuses: dict[str, dict[str, SubjectStatus]] = field(default_factory=dict)

    def out_of_sync(self, target: str) -> int:
        return sum(
            1
            for per_target in self.statuses.values()
            if target in per_target and per_target[target].state != TargetState.IN_SYNC
        )

    def conflicts_on(self, target: str) -> int:
        return sum(1 for c in self.conflicts if c.target == target)


# A ``TargetIds`` value: the ID is free on the target, but the target already holds the same
# schema under another ID (a registry keeps one ID per schema, so it cannot take this one).
HELD_UNDER_ANOTHER_ID = "held-under-another-id"

# On a target: target subject -> version -> (schema ID, fingerprint).
TargetSubjects = Mapping[str, Mapping[int, tuple[int, str]]]
# On a target: schema ID -> fingerprint of the schema it holds there, None when free (or
# HELD_UNDER_ANOTHER_ID).
TargetIds = Mapping[int, "str | None"]
# (primary subject, target) -> target subject, None when the subject is not distributed.
Translate = Callable[[str, str], "str | None"]


def ids_to_check(
    primary: Mapping[str, Sequence[SchemaVersion]],
    targets: Sequence[str],
    target_subjects: Mapping[str, TargetSubjects],
    translate: Translate,
) -> dict[str, set[int]]:
    """Per target, the schema IDs whose use there must be looked up before :func:`plan`:
    those of primary versions the target's subject does not hold yet."""
    wanted: dict[str, set[int]] = {target: set() for target in targets}
    for subject, versions in primary.items():
        for target in targets:
            target_subject = translate(subject, target)
            if target_subject is None:
                continue
            held = target_subjects.get(target, {}).get(target_subject, {})
            wanted[target].update(v.schema_id for v in versions if v.version not in held)
    return wanted


def plan(
    primary: Mapping[str, Sequence[SchemaVersion]],
    targets: Sequence[str],
    target_subjects: Mapping[str, TargetSubjects],
    target_ids: Mapping[str, TargetIds],
    translate: Translate,
    primary_states: Mapping[tuple[str, int], str] | None = None,
    target_states: Mapping[str, Mapping[tuple[str, int], str]] | None = None,
) -> Plan:
    """What to copy where, what conflicts, and which copies' states follow the primary's.

    Per subject and target, versions go in ascending order. A version the target subject holds
    with the same ID and content is in sync. One the target holds with another ID or content,
    or whose ID the target uses for a different schema, is a conflict: it is reported, nothing
    is written for it, and the subject's later versions wait (copying them would reorder the
    subject's history). An ID not looked up yet (absent from ``target_ids``) waits as pending.
    """
    result = Plan()
    for subject in sorted(primary):
        versions = sorted(primary[subject], key=lambda v: v.version)
        for target in targets:
            target_subject = translate(subject, target)
            if target_subject is None:
                continue
            held = target_subjects.get(target, {}).get(target_subject, {})
            ids = target_ids.get(target, {})
            synced: list[int] = []
            missing: list[int] = []
            conflict: str | None = None
            for version in versions:
                if conflict is not None:
                    missing.append(version.version)
                    continue
                there = held.get(version.version)
                if there is not None:
                    if there == (version.schema_id, version.fingerprint):
                        synced.append(version.version)
                        wanted_state = (primary_states or {}).get((subject, version.version))
                        current = (target_states or {}).get(target, {}).get((target_subject, version.version))
                        if wanted_state is not None and current is not None and wanted_state != current:
                            result.state_changes.append(
                                StateChange(target, subject, version.version, target_subject, wanted_state)
                            )
                        continue
                    what = "a different schema" if there[1] != version.fingerprint else "the same schema"
                    conflict = (
                        f"version {version.version} of {target_subject} on {target} is {what} with ID "
                        f"{there[0]}; the primary's has ID {version.schema_id}"
                    )
                elif version.schema_id not in ids:
                    missing.append(version.version)
                    continue
                elif ids[version.schema_id] == HELD_UNDER_ANOTHER_ID:
                    conflict = (
                        f"{target} already holds the schema of {subject} version {version.version} "
                        f"under another ID, so it cannot take ID {version.schema_id}"
                    )
                elif ids[version.schema_id] not in (None, version.fingerprint):
                    conflict = (
                        f"ID {version.schema_id} is used on {target} by a different schema; "
                        f"{subject} version {version.version} cannot keep its ID there"
                    )
                else:
                    missing.append(version.version)
                    result.copies.append(Copy(target, subject, version.version, version.schema_id, target_subject))
                    continue
                missing.append(version.version)
                result.conflicts.append(
                    ConflictReport(target, subject, version.version, version.schema_id, target_subject, conflict)
                )
            state = TargetState.CONFLICT if conflict else TargetState.PENDING if missing else TargetState.IN_SYNC
            result.statuses.setdefault(subject, {})[target] = SubjectStatus(
                target, target_subject, state, tuple(synced), tuple(missing), conflict
            )
    return result
