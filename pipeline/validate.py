"""``ferry validate``: is Ferry's replication state consistent, partition by partition?

The driver reads the state with kazoo and confluent-kafka (:func:`collect_state`): the ideal state
(``topics/<route>/<topic>``), the external view (``external/<route>/<topic>``), the live workers
(``workers/live``) and each route's topic metadata on both clusters. Spark then joins them
(:func:`analyze`) and reports, per partition, the first problem in :class:`common.vocabulary.Problem`'s
order (error, unassigned, worker_dead, wrong_worker, missing, not_online; unexpected for a
partition reported held but not in the ideal state), and per topic the partition counts that
disagree between the source cluster, the destination cluster and the ideal state.

The result is plain JSON-ready data (see :func:`run_validation`); ``--store`` keeps it in
ZooKeeper at :attr:`common.zk.layout.ZkLayout.validation` for the controller and operators.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from ferry.common.cli import ferry_version
from ferry.common.config import FerryConfig
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.vocabulary import HELD_STATES, PartitionState, Problem, StrEnum
from ferry.common.zk.layout import ZkLayout, connect, make_client
from ferry.common.zk.state import StateReader
from ferry.pipeline import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class TopicProblem(StrEnum):
    """Topic-level problems: partition counts that disagree (or a topic that does not exist)."""

    SOURCE_TOPIC_MISSING = "source_topic_missing"  # the ideal state mirrors a topic the source lacks
    SOURCE_PARTITIONS = "source_partitions_mismatch"  # source count != ideal state's count
    DESTINATION_TOPIC_MISSING = "destination_topic_missing"  # not (yet) created on the destination
    DESTINATION_PARTITIONS = "destination_partitions_mismatch"  # destination count != source count


# Most important first; topic-level problems sort with partition null, before the partitions.
PARTITION_PROBLEMS = (
    Problem.ERROR,
    Problem.UNASSIGNED,
    Problem.WORKER_DEAD,
    Problem.WRONG_WORKER,
    Problem.MISSING,
    Problem.NOT_ONLINE,
    Problem.UNEXPECTED,
)
TOPIC_PROBLEMS = (
    TopicProblem.SOURCE_TOPIC_MISSING,
    TopicProblem.SOURCE_PARTITIONS,
    TopicProblem.DESTINATION_TOPIC_MISSING,
    TopicProblem.DESTINATION_PARTITIONS,
)

IDEAL_SCHEMA = "route string, topic string, partition int, ideal_worker string"
EXTERNAL_SCHEMA = "route string, topic string, partition int, worker string, state string, reason string"
LIVE_SCHEMA = "worker string"
TOPICS_SCHEMA = "route string, topic string, ideal_partitions int"
# What --store may write to one ZooKeeper node (its default limit, jute.maxbuffer, is 1 MiB).
MAX_STORED_BYTES = 900_000

METADATA_SCHEMA = "route string, topic string, source_partitions int, destination_partitions int"


@dataclass
class ClusterState:
    """Everything validation looks at, as plain rows (one tuple per DataFrame row)."""

    ideal_topics: list[tuple[str, str, int]] = field(default_factory=list)  # route, topic, partitions
    ideal: list[tuple[str, str, int, str | None]] = field(default_factory=list)  # route, topic, p, worker
    external: list[tuple[str, str, int, str | None, str | None, str | None]] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    # route, topic, source partitions, destination partitions (None: no such topic)
    metadata: list[tuple[str, str, int | None, int | None]] = field(default_factory=list)


def read_zookeeper(client: KazooClient, layout: ZkLayout, routes: list[str]) -> ClusterState:
    """Ideal state, external view and live workers of the given routes."""
    reader = StateReader(client, layout)
    state = ClusterState(live=reader.children(layout.live_workers))
    ideal_states, _ = reader.ideal_states(routes)
    for key, ideal in ideal_states.items():
        state.ideal_topics.append((key.route, key.topic, ideal.partitions))
        state.ideal.extend((key.route, key.topic, p, ideal.assignment.get(p)) for p in range(ideal.partitions))
    for key, view in reader.external_views(routes).items():
        state.external.extend(
            # str(): Spark pickles rows to the JVM, which knows plain strings, not Ferry's enums.
            (key.route, key.topic, p, v["worker"], str(v["state"]), v.get("reason"))
            for p, v in sorted(view.partitions.items())
        )
    return state


def topic_partitions(cluster: dict[str, Any], timeout_s: float = 15.0) -> dict[str, int]:
    """Topic -> partition count on one cluster (AdminClient metadata)."""
    try:
        metadata = kafka_clients.admin(cluster).list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise PipelineError(
            f"cannot read topic metadata from {cluster.get('bootstrap.servers')}: {kafka_error(exc)}"
        ) from None
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


@contextmanager
def _zookeeper(config: FerryConfig) -> Iterator[KazooClient]:
    """A started kazoo client for one job, closed afterwards; unreachable raises UnreachableError."""
    client = make_client(config.zookeeper)
    connect(client, config.zookeeper)  # unreachable, refused: one line (UnreachableError, ConfigError)
    try:
        StateReader(client, ZkLayout(config.zookeeper.root)).check_layout(ferry_version())
        yield client
    except KazooException as exc:  # the connection lost for longer than the retry deadline, or refused
        raise PipelineError(f"ZooKeeper at {config.zookeeper.connect}: {type(exc).__name__} {exc}".rstrip()) from None
    finally:
        client.stop()
        client.close()


def collect_state(config: FerryConfig) -> ClusterState:
    """Reads ZooKeeper and both clusters of every route (driver side, no Spark)."""
    layout = ZkLayout(config.zookeeper.root)
    with _zookeeper(config) as client:
        state = read_zookeeper(client, layout, [r.name for r in config.routes])
    counts: dict[str, dict[str, int]] = {}
    for route in config.routes:
        for cluster in (route.source, route.destination):
            if cluster not in counts:
                counts[cluster] = topic_partitions(dict(config.clusters[cluster]))
    for route_name, topic, _ in state.ideal_topics:
        route = config.route(route_name)
        state.metadata.append(
            (
                route_name,
                topic,
                counts[route.source].get(topic),
                counts[route.destination].get(route.destination_topic(topic)),
            )  # renamed by the route's naming
        )
    return state


def _frames(spark: SparkSession, state: ClusterState) -> dict[str, DataFrame]:
    return {
        "ideal": spark.createDataFrame(state.ideal, IDEAL_SCHEMA),
        "external": spark.createDataFrame(state.external, EXTERNAL_SCHEMA),
        "live": spark.createDataFrame([(w,) for w in state.live], LIVE_SCHEMA),
        "topics": spark.createDataFrame(state.ideal_topics, TOPICS_SCHEMA),
        "metadata": spark.createDataFrame(state.metadata, METADATA_SCHEMA),
    }


def partition_problems(ideal: DataFrame, external: DataFrame, live: DataFrame) -> DataFrame:
    """One row per ideal partition with its first problem (null when fine), plus unexpected ones.

    Columns: route, topic, partition, ideal_worker, worker, state, reason, problem. Same rules as
    :func:`common.core.diff.compare`, as joins.
    """
    from pyspark.sql import functions as F

    keys = ["route", "topic", "partition"]
    live_flags = live.select(F.col("worker").alias("ideal_worker"), F.lit(True).alias("ideal_live"))
    joined = ideal.join(external, keys, "left").join(live_flags, "ideal_worker", "left")
    state = F.coalesce(F.col("state"), F.lit(""))
    held = state.isin(*HELD_STATES)
    same_worker = F.col("worker").eqNullSafe(F.col("ideal_worker"))
    problem = (
        F.when(state == PartitionState.ERROR, Problem.ERROR)
        .when(F.col("ideal_worker").isNull(), Problem.UNASSIGNED)
        .when(F.col("ideal_live").isNull(), Problem.WORKER_DEAD)
        .when(held & ~same_worker, Problem.WRONG_WORKER)
        .when(~held & ~same_worker, Problem.MISSING)
        .when(~state.isin(PartitionState.ONLINE, PartitionState.PAUSED), Problem.NOT_ONLINE)  # paused: on purpose
    )
    assessed = joined.withColumn("problem", problem).select(
        *keys, "ideal_worker", "worker", "state", "reason", "problem"
    )
    unexpected = (
        external.filter(F.col("state").isin(*HELD_STATES))
        .join(ideal, keys, "left_anti")
        .select(
            *keys,
            F.lit(None).cast("string").alias("ideal_worker"),
            "worker",
            "state",
            "reason",
            F.lit(Problem.UNEXPECTED).alias("problem"),
        )
    )
    return assessed.unionByName(unexpected)


def topic_problems(topics: DataFrame, metadata: DataFrame) -> DataFrame:
    """One row per topic-level problem: route, topic, ideal/source/destination partitions, problem."""
    from pyspark.sql import functions as F

    joined = topics.join(metadata, ["route", "topic"], "left")
    src, dst, ideal = F.col("source_partitions"), F.col("destination_partitions"), F.col("ideal_partitions")
    checks = F.array(
        F.when(src.isNull(), F.lit(TopicProblem.SOURCE_TOPIC_MISSING)),
        F.when(src.isNotNull() & (src != ideal), F.lit(TopicProblem.SOURCE_PARTITIONS)),
        F.when(dst.isNull(), F.lit(TopicProblem.DESTINATION_TOPIC_MISSING)),
        F.when(dst.isNotNull() & (dst != F.coalesce(src, ideal)), F.lit(TopicProblem.DESTINATION_PARTITIONS)),
    )
    return joined.withColumn("problem", F.explode(F.filter(checks, lambda c: c.isNotNull()))).select(
        "route", "topic", "ideal_partitions", "source_partitions", "destination_partitions", "problem"
    )


def _partition_detail(row: dict[str, Any]) -> str:
    problem, ideal, worker, state = row["problem"], row["ideal_worker"], row["worker"], row["state"]
    if problem == Problem.ERROR:
        return f"{worker} reports ERROR: {row['reason'] or 'no reason given'}"
    if problem == Problem.UNASSIGNED:
        return "no worker in the ideal state"
    if problem == Problem.WORKER_DEAD:
        return f"ideal worker {ideal} is not live"
    if problem == Problem.WRONG_WORKER:
        return f"ideal worker {ideal}, but {worker} reports it {state}"
    if problem == Problem.MISSING:
        return f"ideal worker {ideal} does not report it" + (f" ({worker} reports {state})" if worker else "")
    if problem == Problem.NOT_ONLINE:
        return f"ideal worker {ideal} reports it {state}"
    return f"{worker} reports it {state} but the ideal state has no such partition"


def _topic_detail(row: dict[str, Any]) -> str:
    ideal, src, dst = row["ideal_partitions"], row["source_partitions"], row["destination_partitions"]
    problem = row["problem"]
    if problem == TopicProblem.SOURCE_TOPIC_MISSING:
        return f"not on the source cluster (ideal state: {ideal} partitions)"
    if problem == TopicProblem.SOURCE_PARTITIONS:
        return f"source has {src} partitions, ideal state {ideal}"
    if problem == TopicProblem.DESTINATION_TOPIC_MISSING:
        return "not on the destination cluster"
    return f"destination has {dst} partitions, source {src if src is not None else '-'}, ideal state {ideal}"


def _problem_order(problem: dict[str, Any]) -> tuple[str, str, int, int]:
    order = (*TOPIC_PROBLEMS, *PARTITION_PROBLEMS)
    partition = -1 if problem["partition"] is None else problem["partition"]
    return problem["route"], problem["topic"], partition, order.index(problem["problem"])


def analyze(spark: SparkSession, state: ClusterState) -> dict[str, Any]:
    """The validation result for ``state``: ``{"ok", "problems", "counts", "srcKafka"}``."""
    from pyspark.sql import functions as F

    frames = _frames(spark, state)
    assessed = partition_problems(frames["ideal"], frames["external"], frames["live"])
    found = assessed.filter(F.col("problem").isNotNull()).select(
        "route",
        "topic",
        "partition",
        "problem",
        "ideal_worker",
        "worker",
        "state",
        "reason",
        *(
            F.lit(None).cast("int").alias(c)
            for c in ("ideal_partitions", "source_partitions", "destination_partitions")
        ),
    )
    per_topic = topic_problems(frames["topics"], frames["metadata"]).select(
        "route",
        "topic",
        F.lit(None).cast("int").alias("partition"),
        "problem",
        *(F.lit(None).cast("string").alias(c) for c in ("ideal_worker", "worker", "state", "reason")),
        "ideal_partitions",
        "source_partitions",
        "destination_partitions",
    )
    # One Spark job: the problems are few, the partitions may be many.
    rows = [r.asDict() for r in found.unionByName(per_topic).collect()]
    bad_partitions = [r for r in rows if r["problem"] in PARTITION_PROBLEMS]
    bad_topics = [r for r in rows if r["problem"] in TOPIC_PROBLEMS]

    problems: list[dict[str, Any]] = [
        {
            "route": r["route"],
            "topic": r["topic"],
            "partition": r["partition"],
            "problem": r["problem"],
            "detail": _partition_detail(r),
        }
        for r in bad_partitions
    ]
    problems += [
        {
            "route": r["route"],
            "topic": r["topic"],
            "partition": None,
            "problem": r["problem"],
            "detail": _topic_detail(r),
        }
        for r in bad_topics
    ]
    problems.sort(key=_problem_order)
    src_kafka = sorted(
        (
            {
                "route": r["route"],
                "topic": r["topic"],
                "sourcePartitions": r["source_partitions"],
                "idealPartitions": r["ideal_partitions"],
            }
            for r in bad_topics
            if r["problem"] in (TopicProblem.SOURCE_TOPIC_MISSING, TopicProblem.SOURCE_PARTITIONS)
        ),
        key=lambda r: (r["route"], r["topic"]),
    )
    by_problem = Counter(r["problem"] for r in rows)
    counts: dict[str, int] = {
        "topics": len(state.ideal_topics),
        "partitions": len(state.ideal),
        # Every ideal partition without a problem is ONLINE (or PAUSED) on its live ideal worker.
        "online": len(state.ideal) - sum(1 for r in bad_partitions if r["problem"] != Problem.UNEXPECTED),
        "liveWorkers": len(state.live),
        "problems": len(problems),
    }
    counts.update({name: by_problem.get(name, 0) for name in (*PARTITION_PROBLEMS, *TOPIC_PROBLEMS)})
    return {"ok": not problems, "problems": problems, "counts": counts, "srcKafka": src_kafka}


def run_validation(config: FerryConfig, master: str | None = None, spark: SparkSession | None = None) -> dict[str, Any]:
    """Reads the whole state and validates it on Spark; the JSON-ready result.

    ``master`` picks the Spark master when no ``spark`` session is passed (see
    :func:`pipeline.spark.get_session`). Raises :class:`PipelineError` when ZooKeeper or a
    cluster cannot be read.
    """
    from ferry.pipeline.spark import get_session

    state = collect_state(config)
    return analyze(spark or get_session(master, app_name="ferry-validate"), state)


def store_result(config: FerryConfig, result: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """Writes ``result`` plus ``checkedAt`` (epoch seconds) to the validation node; returns what it wrote."""
    stored = {**result, "checkedAt": int(time.time() if now is None else now)}
    data = json.dumps(stored, sort_keys=True, separators=(",", ":")).encode()
    if len(data) > MAX_STORED_BYTES:
        # ZooKeeper refuses nodes over ~1 MB (jute.maxbuffer): keep the most important problems.
        keep = max(1, len(result["problems"]) * MAX_STORED_BYTES // len(data) * 9 // 10)
        stored = {**stored, "problems": result["problems"][:keep], "problemsTruncated": len(result["problems"])}
        data = json.dumps(stored, sort_keys=True, separators=(",", ":")).encode()
    path = ZkLayout(config.zookeeper.root).validation
    with _zookeeper(config) as client:
        try:
            client.set(path, data)
        except NoNodeError:
            try:
                client.create(path, data, makepath=True)
            except NodeExistsError:  # created meanwhile by another validation
                client.set(path, data)
    return stored
