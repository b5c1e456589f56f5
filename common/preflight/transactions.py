"""``ferry check --connect``'s checks for exactly-once routes: the destination's transaction settings and
the transactional-id ACLs the workers need there.

Pure: the brokers' settings, their count and the ACLs in, one verdict per route out; no I/O.

An exactly-once route's workers write in Kafka transactions on the destination. Its transaction
coordinators keep every transaction's state in the internal topic ``__transaction_state``, which a
broker creates at the first transaction with ``transaction.state.log.replication.factor`` replicas
(and refuses to while the cluster has fewer brokers), and writes with ``acks=all`` under
``transaction.state.log.min.isr``:

- a replication factor greater than the brokers: the topic is never created, no transaction starts
  (an error);
- a min.isr greater than the brokers, or than the replication factor: no write to the topic can
  succeed, no transaction starts (an error);
- a min.isr of 1 with more brokers: a transaction's state is acknowledged by one broker alone, and is
  lost with it (a warning).

Each worker's writer has its own ``transactional.id``, ``ferry.<route>.<worker>``
(:meth:`common.config.RouteConfig.transactional_id`), so the workers need ``Write`` and ``Describe``
on the transactional ids with the route's prefix (:func:`transactional_id_prefix`), which ``ferry
acls`` prints (:mod:`common.preflight.acls`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ferry.common.config import RouteConfig
from ferry.common.preflight import acls

REPLICATION_FACTOR = "transaction.state.log.replication.factor"
MIN_ISR = "transaction.state.log.min.isr"
SETTINGS = (REPLICATION_FACTOR, MIN_ISR)

OK, WARNING, ERROR = "ok", "warning", "error"


@dataclass(frozen=True)
class Verdict:
    """One line's worth: ``level`` (:data:`OK`, :data:`WARNING`, :data:`ERROR`) and what it says."""

    level: str
    detail: str


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def settings_verdict(cluster: str, settings: Mapping[int, Mapping[str, str | None]], count: int) -> Verdict:
    """Whether transactions can start on ``cluster``, which has ``count`` brokers, from the values of
    :data:`SETTINGS` each broker shows (broker id -> its settings). Brokers that disagree are judged by
    the worst of their values."""
    factors: set[int] = set()
    isrs: set[int] = set()
    for shown in settings.values():
        for name, found in ((REPLICATION_FACTOR, factors), (MIN_ISR, isrs)):
            value = shown.get(name)
            if value is None or not str(value).strip().lstrip("-").isdigit():
                return Verdict(ERROR, f"{cluster}'s brokers do not say their {name} (got {value!r})")
            found.add(int(str(value).strip()))
    if not factors:
        return Verdict(ERROR, f"{cluster} showed no broker")
    factor, isr, lowest_isr = max(factors), max(isrs), min(isrs)
    said = f"{REPLICATION_FACTOR}={_values(factors)}, {MIN_ISR}={_values(isrs)} on {_plural(count, 'broker')}"
    if factor > count:
        return Verdict(
            ERROR,
            f"{said}: transactions cannot start (the replication factor is more than the brokers, so "
            "__transaction_state is never created)",
        )
    if isr > count or isr > factor:
        return Verdict(
            ERROR,
            f"{said}: transactions cannot start (the min.isr is more than the "
            f"{'brokers' if isr > count else 'replication factor'}, so no write to __transaction_state succeeds)",
        )
    if lowest_isr <= 1 and count > 1:
        return Verdict(
            WARNING,
            f"{said}: a transaction's state is acknowledged by one broker alone and lost with it "
            "(set the min.isr to 2 and the replication factor to 3 or more)",
        )
    return Verdict(OK, said)


def _values(values: set[int]) -> str:
    return "/".join(str(v) for v in sorted(values))


def transactional_id_prefix(route: RouteConfig) -> str:
    """The prefix every transactional id of ``route``'s writers starts with (``ferry.<route>.``)."""
    return route.transactional_id("")


def transactional_id_acls(needed: Iterable[acls.Acl], route: RouteConfig, cluster: str) -> list[acls.Acl]:
    """Those of ``needed`` (e.g. what :func:`acls.missing` found) that are ``route``'s transactional ids
    on ``cluster``."""
    prefix = transactional_id_prefix(route)
    return [
        acl
        for acl in needed
        if acl.cluster == cluster
        and acl.resource.type == acls.TRANSACTIONAL_ID
        and acl.resource.name == prefix
        and acl.resource.pattern == acls.PREFIXED
    ]


def acl_verdict(route: RouteConfig, missing: Iterable[acls.Acl], cluster: str) -> Verdict:
    """Whether ``cluster`` grants what ``route``'s writers need on their transactional ids, from what it
    does not grant (``missing``: :func:`acls.missing` of everything Ferry needs there)."""
    prefix = transactional_id_prefix(route)
    lacking = transactional_id_acls(missing, route, cluster)
    if lacking:
        operations = ", ".join(sorted({acl.operation for acl in lacking}))
        return Verdict(
            ERROR,
            f"{operations} not granted on the transactional ids {prefix}* (prefixed): the workers cannot start "
            "their transactions; grant what `ferry acls` prints",
        )
    return Verdict(OK, f"Write and Describe granted on the transactional ids {prefix}* (prefixed)")
