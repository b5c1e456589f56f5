"""Which destination topic a route's source topic is copied to, and back.

Identity for now. Issue 10 (multi-cluster) brings topic renaming as ``common.naming``
(``destination_topic(route, topic)`` / ``source_topic(route, dest_topic)``); when it lands these two
functions delegate to it, and every exact-offsets caller (look-back, checkpoints) follows.
"""

from __future__ import annotations

from common.config import RouteConfig


def destination_topic(route: RouteConfig, topic: str) -> str:
    return topic


def source_topic(route: RouteConfig, destination: str) -> str:
    return destination
