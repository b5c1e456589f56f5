"""``ferry audit``: did every record of a topic reach the destination, exactly once?

Spark reads the topic on the source and on the destination in batch (Spark's Kafka source,
``startingOffsets=earliest``, ``endingOffsets=latest``, ``read_committed``: what an exactly-once
route's consumers see, without aborted copies), keeps the records whose timestamp is in
``[from, to)``, and identifies each by ``(partition, sha256(key, value, headers), timestamp)``:
Ferry copies key, value, headers and the CreateTime timestamp to the same partition, so a record
and its copy share the identity while offsets differ. Counting each identity on both sides gives,
per identity with ``s`` source and ``d`` destination copies:

- missing at the destination: ``s - d`` when ``s > d``
- duplicated: ``d - s`` when ``d > s > 0``
- extra (on the destination only): ``d`` when ``s == 0``

A route with loop prevention (active-active, meshes with identity names) shares its topics with
other routes and with local producers, so both sides are first narrowed by the provenance header
(:mod:`common.core.provenance`), by the same rule the worker applies (:func:`common.core.topology.copy_flags`):

- ``source``: the source records the route copies (origin among the route's copied origins, path
  not holding the destination); the others, copies the route rightly skips, are ``sourceSkipped``;
- ``destination``: the destination records this route wrote (the header's path ends with the
  route's source); records without the header, produced on the destination, are
  ``destinationLocal``, and copies written by other routes are ``otherRoutes``.

Those three are information, never problems. A route without loop prevention compares the whole
topics, as before (a copy made without the header, e.g. by hand, still counts).

The totals are also given per partition and per time bucket. The pure parts (time parsing,
route choice, the report) sit at the top of this module; the Spark job in :func:`run_audit`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core.provenance import HEADER as PROVENANCE_HEADER
from ferry.common.errors import ConfigError
from ferry.pipeline import PipelineError
from ferry.pipeline.kafka_options import spark_kafka_options

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Records of a loop-prevention route's topics that are not its business (module docstring).
OTHER_FIELDS = ("sourceSkipped", "destinationLocal", "otherRoutes")
COUNT_FIELDS = ("source", "destination", "missing", "duplicated", "extra", *OTHER_FIELDS)
PROBLEM_FIELDS = ("missing", "duplicated", "extra")


def parse_time(text: str) -> int:
    """Epoch milliseconds from ``text``: an integer (epoch ms) or an ISO-8601 date/time.

    An ISO time without a zone is taken as UTC.
    """
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise PipelineError(f"{text!r} is neither epoch milliseconds nor an ISO-8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return math.floor(moment.timestamp() * 1000)


def iso_ms(ms: int) -> str:
    """``2024-05-01T12:00:00.000Z`` for epoch milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def pick_route(config: FerryConfig, name: str | None) -> RouteConfig:
    """The route named ``name``, or the only configured one (:meth:`FerryConfig.route`)."""
    try:
        return config.route(name)
    except ConfigError as exc:
        raise PipelineError(str(exc)) from None


def classify(source: int, destination: int) -> dict[str, int]:
    """Records missing, duplicated and extra for one identity seen ``source`` and ``destination`` times.

    The rule :func:`compare_identities` applies as Spark expressions (a test holds them equal).
    """
    return {
        "missing": max(source - destination, 0),
        "duplicated": destination - source if destination > source > 0 else 0,
        "extra": destination if source == 0 else 0,
    }


def _totals(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    totals = dict.fromkeys(COUNT_FIELDS, 0)
    for row in rows:
        for name in COUNT_FIELDS:
            totals[name] += int(row.get(name) or 0)
    return totals


def build_report(
    topic: str,
    route: str,
    partitions: Iterable[Mapping[str, Any]],
    buckets: Iterable[Mapping[str, Any]],
    bucket_s: int,
    window: tuple[int | None, int | None] = (None, None),
) -> dict[str, Any]:
    """The audit result from per-partition and per-bucket counts (``partition``/``startMs`` + COUNT_FIELDS)."""
    partition_rows = sorted(
        ({"partition": int(r["partition"]), **_totals([r])} for r in partitions), key=lambda r: r["partition"]
    )
    bucket_rows: list[dict[str, Any]] = [
        {"start": iso_ms(int(r["startMs"])), "startMs": int(r["startMs"]), **_totals([r])} for r in buckets
    ]
    bucket_rows.sort(key=lambda r: int(r["startMs"]))
    totals = _totals(partition_rows)
    return {
        "topic": topic,
        "route": route,
        "from": None if window[0] is None else iso_ms(window[0]),
        "to": None if window[1] is None else iso_ms(window[1]),
        "bucketSeconds": bucket_s,
        **totals,
        "partitions": partition_rows,
        "buckets": bucket_rows,
        "ok": all(totals[name] == 0 for name in PROBLEM_FIELDS),
    }


# --- Spark ---------------------------------------------------------------------------------------


def _hex_or_null(column: Column) -> Column:
    from pyspark.sql import functions as F

    # A null and an empty key/value are different records; "-" is never a sha256 hex digest.
    return F.coalesce(F.sha2(column, 256), F.lit("-"))


def record_identity(records: DataFrame) -> DataFrame:
    """``partition, record_id, ts_ms`` from a Kafka DataFrame (with headers).

    ``record_id`` hashes the digests of key, value and each header (name and value, in order),
    so field boundaries are unambiguous and no field can be mistaken for another. Ferry's own
    provenance header (:data:`common.core.provenance.HEADER`) is left out: a copy carries it, its
    source record does not, and they are the same record.
    """
    from pyspark.sql import functions as F

    headers = F.array_join(
        F.transform(
            F.filter(
                F.coalesce(F.col("headers"), F.array().cast("array<struct<key:string,value:binary>>")),
                lambda h: h["key"] != F.lit(PROVENANCE_HEADER),
            ),
            lambda h: F.concat(F.sha2(F.encode(h["key"], "UTF-8"), 256), F.lit("="), _hex_or_null(h["value"])),
        ),
        ",",
    )
    content = F.concat_ws("|", _hex_or_null(F.col("key")), _hex_or_null(F.col("value")), headers)
    return records.select(
        "partition",
        F.sha2(F.encode(content, "UTF-8"), 256).alias("record_id"),
        F.unix_millis(F.col("timestamp")).alias("ts_ms"),
        provenance_path(F.col("headers"), F.col("topic")).alias("path"),
    )


def provenance_path(headers: Column, topic: Column) -> Column:
    """The path of a record's provenance header as an array of cluster names; null without the header
    or with a foreign one (bound to another topic than the record's: forwarded by an application).

    ``2|<path>|<flags>|<topic tag>|<offset>``, ``3|<path>|<flags>|<topic tag>`` (an exactly-once route's), or
    ``1|<path>|<flags>|<offset>`` bound to any topic (:mod:`common.core.provenance`): the second field, split on
    commas.
    """
    from pyspark.sql import functions as F

    own = F.filter(
        F.coalesce(headers, F.array().cast("array<struct<key:string,value:binary>>")),
        lambda h: h["key"] == F.lit(PROVENANCE_HEADER),
    )
    # F.get, not [], returns null past the end (Spark's ANSI mode would fail the job otherwise).
    value = F.get(own, 0)["value"].cast("string")
    fields = F.split(value, "[|]")
    tag = F.lpad(F.lower(F.hex(F.crc32(F.encode(topic, "UTF-8")))), 8, "0")  # provenance.topic_tag
    bound = (F.get(fields, 0) == F.lit("1")) | (F.get(fields, 3) == tag)
    return F.when(value.isNull() | ~bound, F.lit(None)).otherwise(F.split(F.get(fields, 1), ","))


def copied_by_route(path: Column, source: str, destination: str, origins: frozenset[str]) -> Column:
    """Whether a source record is one the route copies (:func:`common.core.topology.copy_flags`' rule for loop
    prevention).

    A record without the header originated at ``source``; one whose path holds ``destination``
    came from or through it; one whose origin (the path's first cluster) is not among ``origins``
    reaches the destination along another route.
    """
    from pyspark.sql import functions as F

    return F.when(path.isNull(), F.lit(source in origins)).otherwise(
        ~F.array_contains(path, destination) & F.get(path, 0).isin(*sorted(origins))
    )


def destination_kind(path: Column, source: str) -> Column:
    """``copy`` (written by the route from ``source``: its path ends there), ``local`` (no header) or ``other``."""
    from pyspark.sql import functions as F

    return (
        F.when(path.isNull(), F.lit("local"))
        .when(F.get(path, F.size(path) - 1) == F.lit(source), F.lit("copy"))
        .otherwise(F.lit("other"))
    )


def read_topic(spark: SparkSession, kafka_options: Mapping[str, str], topic: str) -> DataFrame:
    """The whole topic as it is now, in batch, headers included.

    ``kafka_options``: the cluster's connection and security settings as Spark Kafka source
    options (:func:`pipeline.kafka_options.spark_kafka_options`).
    """
    reader = (
        spark.read.format("kafka")
        .options(**kafka_options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        # What a read_committed consumer sees: an exactly-once route's aborted copies (a fenced or
        # failed writer's) are not records of the topic. The Java client reads uncommitted by default.
        .option("kafka.isolation.level", "read_committed")
        # A topic being written to may have offsets that vanish (retention) while we read.
        .option("failOnDataLoss", "false")
    )
    return reader.load()


def _empty_identities(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], "partition int, record_id string, ts_ms long, path array<string>")


def compare_identities(source: DataFrame, destination: DataFrame, bucket_s: int) -> DataFrame:
    """Per identity: the COUNT_FIELDS counts and its bucket's ``startMs``.

    ``source`` may carry a boolean ``copied`` column (False: the route skips the record) and
    ``destination`` a ``kind`` column (:func:`destination_kind`); without them every source
    record is copied and every destination record is a copy.
    """
    from pyspark.sql import functions as F

    keys = ["partition", "record_id", "ts_ms"]
    if "copied" not in source.columns:
        source = source.withColumn("copied", F.lit(True))
    if "kind" not in destination.columns:
        destination = destination.withColumn("kind", F.lit("copy"))

    def count_if(condition: Column, name: str) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0)).alias(name)

    src = source.groupBy(*keys).agg(count_if(F.col("copied"), "s"), count_if(~F.col("copied"), "sourceSkipped"))
    kind = F.col("kind")
    dst = destination.groupBy(*keys).agg(
        count_if(kind == "copy", "d"),
        count_if(kind == "local", "destinationLocal"),
        count_if(kind == "other", "otherRoutes"),
    )
    s, d = F.col("s"), F.col("d")
    return (
        src.join(dst, keys, "full_outer")
        .fillna(0, subset=["s", "d", *OTHER_FIELDS])
        .select(
            *keys,
            *(F.col(name) for name in OTHER_FIELDS),
            s.alias("source"),
            d.alias("destination"),
            F.when(s > d, s - d).otherwise(0).alias("missing"),
            F.when((d > s) & (s > 0), d - s).otherwise(0).alias("duplicated"),
            F.when(s == 0, d).otherwise(0).alias("extra"),
            (F.floor(F.col("ts_ms") / (bucket_s * 1000)) * (bucket_s * 1000)).cast("long").alias("startMs"),
        )
    )


def summarize(per_identity: DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Collected (per partition, per bucket) sums of :func:`compare_identities`' counts."""
    from pyspark.sql import functions as F

    sums = [F.sum(name).cast("long").alias(name) for name in COUNT_FIELDS]
    # Both groupings in one job, so each topic is read from Kafka once.
    rows = (
        per_identity.groupingSets([("partition",), ("startMs",)], "partition", "startMs")
        .agg(*sums, F.grouping("partition").alias("by_bucket"))
        .collect()
    )
    partitions = [
        {k: v for k, v in r.asDict().items() if k not in ("startMs", "by_bucket")} for r in rows if not r["by_bucket"]
    ]
    buckets = [
        {k: v for k, v in r.asDict().items() if k not in ("partition", "by_bucket")} for r in rows if r["by_bucket"]
    ]
    return partitions, buckets


def _topic_exists(cluster: Mapping[str, Any], topic: str) -> bool:
    from confluent_kafka import KafkaException

    from ferry.common.kafka import clients as kafka_clients
    from ferry.common.kafka.errors import kafka_error

    try:
        metadata = kafka_clients.admin(dict(cluster)).list_topics(topic=topic, timeout=15)
    except KafkaException as exc:
        raise PipelineError(
            f"cannot read metadata from {cluster.get('bootstrap.servers')}: {kafka_error(exc)}"
        ) from None
    found = metadata.topics.get(topic)
    return found is not None and found.error is None


def run_audit(
    config: FerryConfig,
    topic: str,
    route: str | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    bucket_s: int = 60,
    master: str | None = None,
    spark: SparkSession | None = None,
) -> dict[str, Any]:
    """Audits ``topic`` on a route; the JSON-ready report (see :func:`build_report`).

    The time window is ``[start_ms, end_ms)`` on record timestamps; None leaves a side open.
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    from ferry.pipeline.spark import get_session, require_kafka_jars

    if bucket_s < 1:
        raise PipelineError("--bucket must be at least 1 second")
    if start_ms is not None and end_ms is not None and start_ms >= end_ms:
        raise PipelineError("--from must be before --to")
    chosen = pick_route(config, route)
    source_cluster = config.clusters[chosen.source]
    destination_cluster = config.clusters[chosen.destination]
    # Spark's Kafka source must connect as securely as Ferry's own clients: translated up front,
    # so what cannot be translated fails before Spark starts.
    source_options = spark_kafka_options(source_cluster, chosen.source)
    destination_options = spark_kafka_options(destination_cluster, chosen.destination)
    if not _topic_exists(source_cluster, topic):
        raise PipelineError(f"topic {topic!r} does not exist on the source cluster {chosen.source}")
    require_kafka_jars()
    spark = spark or get_session(master, app_name="ferry-audit")

    def identities(cluster: Mapping[str, Any], kafka_options: Mapping[str, str], name: str) -> DataFrame:
        if not _topic_exists(cluster, name):  # nothing copied yet: every record is missing
            return _empty_identities(spark)
        frame = record_identity(read_topic(spark, kafka_options, name))
        if start_ms is not None:
            frame = frame.filter(F.col("ts_ms") >= start_ms)
        if end_ms is not None:
            frame = frame.filter(F.col("ts_ms") < end_ms)
        return frame

    source_frame = identities(source_cluster, source_options, topic)
    destination_frame = identities(
        destination_cluster, destination_options, chosen.destination_topic(topic)
    )  # common.core.naming
    origins = config.copied_origins(chosen)
    if origins is not None:  # loop prevention: the topics are shared, narrow both sides by provenance
        source_frame = source_frame.withColumn(
            "copied", copied_by_route(F.col("path"), chosen.source, chosen.destination, origins)
        )
        destination_frame = destination_frame.withColumn("kind", destination_kind(F.col("path"), chosen.source))
    compared = compare_identities(source_frame, destination_frame, bucket_s)
    try:
        partitions, buckets = summarize(compared)
    except (PySparkException, Py4JJavaError) as exc:  # e.g. a broker that went away mid-read
        raise PipelineError(f"the audit job of {topic!r} failed: {str(exc).strip().splitlines()[0]}") from exc
    return build_report(topic, chosen.name, partitions, buckets, bucket_s, (start_ms, end_ms))


def write_chart(report: Mapping[str, Any], path: str) -> None:
    """A PNG of source vs destination record counts per time bucket (problems marked in red)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render to a file only
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    buckets = report["buckets"]
    starts = [float(mdates.date2num(datetime.fromtimestamp(b["startMs"] / 1000, tz=timezone.utc))) for b in buckets]
    width = report["bucketSeconds"] / 86400 * 0.4  # bar width in days, matplotlib's date unit
    figure, axes = plt.subplots(figsize=(10, 4.5))
    try:
        if buckets:
            axes.bar(starts, [b["source"] for b in buckets], width=width, align="edge", label="source", color="#4c72b0")
            axes.bar(
                [s + width for s in starts],
                [b["destination"] for b in buckets],
                width=width,
                align="edge",
                label="destination",
                color="#55a868",
            )
            # Over the bucket's pair of bars, so a bucket with a problem stands out at a glance.
            bad = [
                (s + width, max(b["source"], b["destination"]))
                for s, b in zip(starts, buckets, strict=True)
                if any(b[name] for name in PROBLEM_FIELDS)
            ]
            if bad:
                axes.scatter(
                    [s for s, _ in bad],
                    [n for _, n in bad],
                    marker="v",
                    s=60,
                    color="#c44e52",
                    zorder=3,
                    label="missing/duplicated/extra",
                )
            axes.xaxis_date()
            figure.autofmt_xdate()
        else:
            axes.text(0.5, 0.5, "no records in the window", ha="center", va="center", transform=axes.transAxes)
        status = (
            "OK"
            if report["ok"]
            else (f"missing {report['missing']}, duplicated {report['duplicated']}, extra {report['extra']}")
        )
        axes.set_title(f"{report['topic']} ({report['route']}): records per {report['bucketSeconds']} s - {status}")
        axes.margins(y=0.12)  # room for the markers above the bars
        axes.set_ylabel("records")
        axes.set_xlabel("record timestamp (UTC)")
        axes.legend()
        figure.tight_layout()
        figure.savefig(path, format="png", dpi=100)
    finally:
        plt.close(figure)
