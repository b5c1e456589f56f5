"""What the controller accepts, declared once: request bodies and the ``GET /translate`` query.

The edge checks every body with these shapes (:func:`controller.api.wire.parsed`: a mistake
is a 400 naming the field); the OpenAPI document (:mod:`controller.api.openapi`) takes their schemas
(:data:`REQUESTS`) and the query's parameters. Name rules come from :mod:`common.vocabulary`, the one
definition the config and the domain use too. Each class's name ends in ``Request``; the name the OpenAPI
document publishes a body under is its ``title`` (``ThrottleRequest`` is ``Throttle``). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field

from ferry.common.config import start_position
from ferry.common.vocabulary import (
    CLUSTER_NAME,
    CLUSTER_PATTERN,
    MAX_PARTITIONS,
    ROUTE_NAME,
    ROUTE_PATTERN,
    TOPIC_PATTERN,
    anchored,
    topic_name_problem,
)
from ferry.controller.api.wire import WireRequest

MAX_BULK_TOPICS = 1000
MAX_PAUSED_PER_REQUEST = 100_000
MAX_RATE = 1e15
MAX_WAIT_S = 3600
MAX_OFFSET = 2**63 - 1


def _kafka_topic_name(value: str) -> str:
    problem = topic_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _named(rule: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not rule.fullmatch(value):
            raise ValueError(f"must be {what}, not {value[:80]!r}")
        return value

    return AfterValidator(check)


def _regular_expression(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value[:100]!r} is not a regular expression: {exc}") from None
    return value


def _whole_number(maximum: int) -> BeforeValidator:
    """A query argument's digits as an int (query arguments are text)."""

    def check(value: Any) -> Any:
        if isinstance(value, str):
            if not re.fullmatch(r"[0-9]{1,19}", value) or int(value) > maximum:
                raise ValueError(f"must be a whole number from 0 to {maximum}, not {value[:40]!r}")
            return int(value)
        return value

    return BeforeValidator(check)


TopicName = Annotated[
    str, AfterValidator(_kafka_topic_name), Field(json_schema_extra={"pattern": anchored(TOPIC_PATTERN)})
]
RouteName = Annotated[
    str,
    _named(ROUTE_NAME, "a route name like source.destination"),
    Field(json_schema_extra={"pattern": anchored(ROUTE_PATTERN)}),
]
ClusterName = Annotated[
    str,
    _named(CLUSTER_NAME, "a cluster name (letters, digits, '_' and '-')"),
    Field(json_schema_extra={"pattern": anchored(CLUSTER_PATTERN)}),
]
PartitionCount = Annotated[int, Field(ge=1, le=MAX_PARTITIONS)]
PartitionId = Annotated[int, Field(ge=0, le=MAX_PARTITIONS - 1)]
Rate = Annotated[float, Field(gt=0, le=MAX_RATE)]
Seconds = Annotated[float, Field(ge=0, le=MAX_WAIT_S)]
Pattern = Annotated[str, Field(max_length=1000), AfterValidator(_regular_expression)]


def _start(value: str | int) -> str | int:
    try:
        start = start_position(value)
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix("start ")) from None
    assert start is not None  # only None gives None
    return start


StartPosition = Annotated[
    str | int,
    AfterValidator(_start),
    Field(
        description="where the topic's partitions start when nothing of the route is on the destination yet and "
        "nothing is committed: earliest, latest, or a time (ISO 8601, or epoch milliseconds): the first record at or "
        "after it; in place of the route's start (default: the route's)"
    ),
]


class TopicRequest(WireRequest, title="TopicRequest"):
    """``POST /topics`` (mirror one topic) and ``PUT /topics`` (mirror more of its partitions)."""

    topic: TopicName
    num_partitions: PartitionCount | None = Field(
        None, description="POST: how many partitions to mirror (default: all at the source); PUT: required"
    )
    route: RouteName | None = Field(None, description="only this route (default: every configured route)")
    start: StartPosition | None = Field(None, description="POST only: see TopicEntry.start")


class TopicEntryRequest(WireRequest, title="TopicEntry"):
    """One topic of a bulk ``POST /topics``."""

    topic: TopicName
    num_partitions: PartitionCount | None = None
    start: StartPosition | None = None


class TopicsRequest(WireRequest, title="TopicsRequest"):
    """Many topics in one write and one reconcile; all or nothing."""

    topics: list[TopicEntryRequest] = Field(min_length=1, max_length=MAX_BULK_TOPICS)
    route: RouteName | None = Field(None, description="only this route (default: every configured route)")


class TargetRequest(WireRequest, title="TargetRequest"):
    """``POST /tree/{distributor}/target``: the leaf to switch to."""

    target: ClusterName


class SyncRequest(WireRequest, title="SyncRequest"):
    """``POST /schemas/sync``: no fields; the body may be left out."""


class PauseRequest(WireRequest, title="PauseRequest"):
    """``POST /topics/{topic}/pause`` and ``.../resume``; the body may be left out."""

    partitions: Annotated[list[PartitionId], Field(min_length=1, max_length=MAX_PAUSED_PER_REQUEST)] | None = Field(
        None, description="these partitions only (default: the whole topic)"
    )
    route: RouteName | None = Field(None, description="only this route (default: every route that mirrors the topic)")


class AutobalancingRequest(WireRequest, title="Autobalancing"):
    """``PUT /autobalancing``, and what ``GET /autobalancing`` answers."""

    enabled: bool = Field(description="whether workers joining trigger a rebalance")


class ThrottleRequest(WireRequest, title="Throttle"):
    """``PUT /routes/{route}/throttle``: the route's budget across the fleet (null: no limit on that measure;
    both null: back to the config's). The keys are snake_case, as in the config."""

    max_bytes_per_s: Rate | None = Field(None, alias="max_bytes_per_s")
    max_records_per_s: Rate | None = Field(None, alias="max_records_per_s")


class FailoverRequest(WireRequest, title="FailoverRequest"):
    """``POST /routes/{route}/failover``; every field is optional and the body may be left out."""

    planned: bool = Field(False, description="wait until the source is quiet and everything is copied")
    groups: Pattern | None = Field(None, description="only the consumer groups this regular expression matches")
    topics: Pattern | None = Field(None, description="only the topics this regular expression matches")
    quiet_s: Seconds = Field(5.0, description="planned: how long the source must be quiet")
    timeout_s: Seconds = Field(300.0, description="planned: how long to wait for the quiet source to be copied")
    dry_run: bool = Field(False, description="answer what the failover would do (its plan) and change nothing")


class TranslateRequest(WireRequest):
    """``GET /translate``'s query arguments (text: the numbers are read from their digits)."""

    model_config = ConfigDict(strict=False)

    route: RouteName | None = Field(None, description="the route, <source>.<destination> (optional with one route)")
    topic: TopicName = Field(description="the topic's name at the source")
    partition: Annotated[PartitionId, _whole_number(MAX_PARTITIONS - 1)]
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET), _whole_number(MAX_OFFSET)] = Field(
        description="the position to translate (the next offset to read)"
    )
    direction: Literal["forward", "reverse"] = Field(
        "forward", description="forward: a source position to the destination; reverse: back"
    )


REQUESTS: tuple[type[WireRequest], ...] = (
    TopicRequest,
    TopicsRequest,
    TargetRequest,
    SyncRequest,
    PauseRequest,
    AutobalancingRequest,
    ThrottleRequest,
    FailoverRequest,
)
