"""The ``controller``, ``worker`` and ``spark`` sections (the REST edge's authentication and TLS
included).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from ferry.common import endpoints
from ferry.common.config.base import ClientValue, _Strict


class RestTokenConfig(_Strict):
    """One bearer token of the REST API. Keep the secret out of the file with a placeholder:
    ``value: ${env:FERRY_OPS_TOKEN}`` or ``value: ${file:/etc/ferry/ops.token}``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="who holds it; logged instead of the token")
    role: Literal["read", "write"] = "write"
    """write: every request; read: GET/HEAD only"""
    value: SecretStr  # SecretStr: never shown by repr() or in a validation error
    """the token; e.g. ${env:FERRY_OPS_TOKEN} or ${file:/etc/ferry/ops.token}"""


class RestAuthConfig(_Strict):
    open_reads: bool = False
    """true: GET/HEAD need no token; false: they need a read or write token (/health and /openapi.json never do;
    /metrics does when reads are closed)"""
    tokens: list[RestTokenConfig] = Field(min_length=1)
    """at least one"""

    @field_validator("tokens")
    @classmethod
    def _unique_names(cls, value: list[RestTokenConfig]) -> list[RestTokenConfig]:
        names = [token.name for token in value]
        if len(set(names)) != len(names):
            raise ValueError(f"token names must be unique: {sorted(names)}")
        return value


class RestTlsConfig(_Strict):
    cert_file: str = Field(min_length=1, description="PEM certificate (chain) the REST port presents")
    key_file: str = Field(min_length=1, description="PEM private key of cert_file")
    ca_file: str | None = None
    """what a standby trusts when it forwards a write to the leader; absent: cert_file (every controller presents the
    same certificate)"""


def _advertised_url(value: str | None) -> str | None:
    """``value`` when it is an advertised URL (or absent), else a ValueError saying why not."""
    problem = endpoints.url_problem(value) if value is not None else None
    if problem:
        raise ValueError(problem)
    return value


class ControllerConfig(_Strict):
    rest_host: str = "127.0.0.1"
    """REST API bind address; 0.0.0.0 or :: for every interface (`--rest-host` and $FERRY_REST_HOST override)"""
    rest_port: int = Field(9000, ge=1, lt=65536)
    """REST API port (`--rest-port` overrides)"""
    advertised_url: str | None = None
    """the URL the other controllers reach this one at (standbys forward writes there; `--advertised-url` and
    $FERRY_ADVERTISED_URL override); absent: http(s)://rest_host:port, for a wildcard rest_host this host's name"""
    rebalance_delay_s: float = Field(120.0, ge=0)
    """debounce: rebalance this long after the last membership change"""
    autobalancing: bool = True
    """rebalance after workers join (false: assignments stay where they are; new partitions and a departed worker's are
    still placed); PUT /autobalancing overrides it at run time"""
    failover_delay_s: float = Field(10.0, ge=0)
    """a departed worker keeps its partitions this long"""
    forward_timeout_s: float = Field(10.0, gt=0)
    """a standby's write forwarded to the leader may take this long"""
    observer_interval_s: float = Field(30.0, gt=0)
    """the leader's topic observer looks for new matching topics, added partitions and destination config changes this
    often"""
    lag_interval_s: float = Field(10.0, gt=0)
    """the leader samples committed and log-end offsets this often (lag, /noprogress)"""
    noprogress_after_s: float = Field(60.0, gt=0)
    """a lagging partition whose commit has not moved this long is in /noprogress"""
    validation_interval_s: float = Field(0.0, ge=0)
    """the leader runs the Spark validation (`ferry validate --store`) this often; 0: never"""
    validation_timeout_s: float = Field(300.0, gt=0)
    """a validation run still going after this long is stopped (a JVM start alone can take a minute on a busy host)"""
    rest_threads: int = Field(8, ge=1, le=256)
    """REST worker threads of the WSGI server (cheroot)"""
    checkpoint_interval_s: float = Field(10.0, ge=0)
    """the leader translates the groups of every route's groups patterns this often; 0: never"""
    checkpoint_margin_s: float = Field(60.0, ge=0)
    """Axual's timestamp method, for offsets no exact map covers: look up the committed record's timestamp minus this
    on the destination"""
    acl_sync_interval_s: float = Field(60.0, ge=0)
    """the leader copies the ACLs of every route with sync_acls this often (MirrorMaker 2's
    sync.topic.acls.interval.seconds); 0: never (a failover still grants them)"""
    sync_group_offsets: bool = True
    """commit translated offsets on the destination, only while the group has no active member there, only forward"""
    auth: RestAuthConfig | None = None
    """bearer tokens for the REST API; absent (the default): no authentication"""
    tls: RestTlsConfig | None = None
    """https on the REST port; absent (the default): plain http"""
    check_source_topics: bool = True
    """false: POST /topics trusts numPartitions (then required) instead of asking the source cluster; for benchmarks
    whose topics exist only in ZooKeeper (`ferry bench controller`)"""
    balance: Literal["load", "count"] = "load"
    """how the leader balances: load (new partitions to the least-loaded worker by measured bytes/s, a rebalance by
    load every load_rebalance_interval_s when needed, stuck partitions moved) | count (partition counts only); both
    rebalance counts rebalance_delay_s after workers join or leave"""
    imbalance_ratio: float = Field(1.2, ge=1.0)
    """balance: load: rebalance when the most loaded worker copies more than this times the mean bytes/s"""
    load_rebalance_interval_s: float = Field(300.0, gt=0)
    """balance: load: the leader checks the measured load (and moves what it must) this often, never more often"""
    load_balance_min_bytes_per_s: int = Field(102_400, ge=0)
    """balance: load: no rebalance by load while the mean worker copies less than this many bytes/s (noise at idle)"""
    stuck_after_s: float = Field(120.0, gt=0)
    """balance: load: a partition whose lag grew at every load report for this long while its worker was saturated
    moves to the least-loaded worker"""
    saturated_busy_ratio: float = Field(0.9, gt=0, le=1.0)
    """balance: load: a worker is saturated when its copy loop spent at least this share of its last load window
    copying (it never waited for records)"""

    _check_advertised_url = field_validator("advertised_url")(_advertised_url)


class WorkerConfig(_Strict):
    metrics_host: str = "127.0.0.1"
    """metrics and /health bind address; 0.0.0.0 or :: for every interface (`--metrics-host` and $FERRY_METRICS_HOST
    override)"""
    metrics_port: int = Field(
        9100, ge=0, lt=65536, description="metrics and /health port; 0 disables them (`--metrics-port` overrides)"
    )
    advertised_metrics_url: str | None = None
    """the metrics URL the worker registers in ZooKeeper (`GET /instances` shows it; `--advertised-metrics-url` and
    $FERRY_ADVERTISED_METRICS_URL override); absent: http://metrics_host:port, for a wildcard metrics_host this
    host's name"""
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    """where a partition with no committed offset starts: earliest | latest"""
    commit_interval_s: float = Field(1.0, gt=0)
    """at-least-once routes: how often acknowledged source offsets are committed"""
    transaction_interval_s: float = Field(0.25, gt=0)
    """exactly-once routes: how often each route commits its transaction (its copies, their offset-map segments and
    its source offsets); a read_committed consumer sees a copy once its transaction commits, so this bounds how long
    it waits (p99 about 0.3-0.4 s at the default); each commit stops the route's copy loop until the destination
    acknowledged the transaction's copies (a few ms), so shorter intervals cost records/s (BENCHMARKS.md)"""
    consume_batch: int = Field(1000, ge=1, le=100_000)
    """records taken from the consumer per call"""
    copy_core: Literal["auto", "native", "python"] = "auto"
    """the copy loop's per-record work: native (a C library over the same librdkafka, built by `make setup`; records
    never become Python objects), python (confluent-kafka's Python API), or auto: native where the library is built
    and matches the installed confluent-kafka, python otherwise (the worker logs why)"""
    keep_freed_memory: bool = True
    """glibc's malloc: allocations up to 64 MiB (whole fetch responses, copies of large records) come from the heap,
    and up to 128 MiB of freed heap is kept for reuse rather than given back to the OS at once: 17-25 % less CPU per
    10 KiB record, about 80 MB more resident memory (BENCHMARKS.md); false: glibc's own thresholds"""
    load_report_interval_s: float = Field(30.0, gt=0)
    """how often the worker measures what it copies per partition (bytes/s, records/s, lag) and how busy its copy loop
    is, for the leader's balance by load; written in its status at most this often"""
    resume_lookback_records: int = Field(200_000, ge=0)
    """taking a partition: at most this many destination records are read back to find the route's own records at or
    after its committed offset"""
    copy_loop_stalled_after_s: float = Field(120.0, gt=0)
    """/health/live (and /health/ready) fail once the copy loop has not passed for this long: a stuck process, for the
    orchestrator to restart"""
    destination_stall_s: float = Field(300.0, gt=0)
    """a destination producer whose queue stays full this long (the destination acknowledged nothing) is failed: what it
    holds is purged and the route's partitions restart from the destination once it answers (the default is librdkafka's
    delivery timeout, which bounds that wait for a producer whose records time out)"""
    producer: dict[str, ClientValue] = Field(default_factory=dict)
    """librdkafka overrides for the destination producers, on top of the cluster's own properties"""
    consumer: dict[str, ClientValue] = Field(default_factory=dict)
    """librdkafka overrides for the source consumers"""

    _check_advertised_metrics_url = field_validator("advertised_metrics_url")(_advertised_url)


class SparkConfig(_Strict):
    master: str | None = None
    """where `ferry validate` and `ferry audit` run: a Spark master URL (spark://..., yarn, k8s://...); `--master` wins
    over it; absent: $FERRY_SPARK_MASTER, then local[*]"""
