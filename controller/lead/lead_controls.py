"""The operator's controls as the leader reads them: the desired controls and the throttle shares
last written (one read at each read of the leader state), and each throttled route's budget.
"""

from __future__ import annotations

import logging

from ferry.common.config import FerryConfig
from ferry.common.core.operate import controls as fleet_controls
from ferry.common.core.operate.controls import Controls
from ferry.common.zk.layout import ZkLayout
from ferry.controller.lead.store import Store

log = logging.getLogger(__name__)


def read_controls(store: Store, layout: ZkLayout) -> tuple[Controls, fleet_controls.Shares, bool]:
    """The controls (unreadable: none, logged), the shares as last written ({} when unreadable) and
    whether the shares' node exists."""
    got = store.data(layout.controls)
    try:
        controls = Controls.from_bytes(None if got is None else got[0])
    except ValueError as exc:
        log.error("ignoring an unreadable %s: %s", layout.controls, exc)
        controls = Controls()
    got = store.data(layout.throttle_shares)
    try:
        shares = fleet_controls.shares_from_bytes(None if got is None else got[0])
    except ValueError:
        shares = {}
    return controls, shares, got is not None


def budgets(config: FerryConfig, controls: Controls) -> dict[str, fleet_controls.Throttle]:
    """Each throttled route's budget: the run-time one, else the config's."""
    result = {
        route.name: fleet_controls.Throttle(route.max_bytes_per_s, route.max_records_per_s)
        for route in config.routes
        if route.max_bytes_per_s or route.max_records_per_s
    }
    result.update(controls.throttles)
    return result
