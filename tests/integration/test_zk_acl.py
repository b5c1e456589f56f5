"""ZooKeeper digest authentication: Ferry's clients put their ACL on every node they create."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from ferry.common.config import ZookeeperConfig
from ferry.common.zk.layout import ZkLayout, make_client


@pytest.fixture
def anonymous(zk_chroot: str) -> Iterator[KazooClient]:
    """A client without Ferry's credentials, on the test's chroot."""
    client = KazooClient(hosts=zk_chroot)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def test_with_others_read_anyone_reads_but_only_ferry_changes(zk_chroot: str, anonymous: KazooClient) -> None:
    config = ZookeeperConfig(connect=zk_chroot, auth={"digest": "ferry:s3cret", "others": "read"})  # type: ignore[arg-type]
    layout = ZkLayout("/ferry/prod")
    ferry = make_client(config)
    ferry.start(timeout=15)
    try:
        # As Ferry's participants do: ensure_path at start, ephemeral nodes, leader transactions.
        for path in layout.persistent_paths():
            ferry.ensure_path(path)
        ferry.create(layout.live_worker("w1"), b'{"id": "w1"}', ephemeral=True)
        ferry.ensure_path(layout.route_topics("src.dst"))
        transaction = ferry.transaction()
        transaction.create(layout.topic("src.dst", "orders"), b"{}")
        assert transaction.commit() == [layout.topic("src.dst", "orders")]

        assert anonymous.get(layout.live_worker("w1"))[0] == b'{"id": "w1"}'
        assert "w1" in anonymous.get_children(layout.live_workers)
        with pytest.raises(NoAuthError):
            anonymous.set(layout.live_worker("w1"), b"forged")
        with pytest.raises(NoAuthError):
            anonymous.create(layout.live_worker("intruder"), b"", ephemeral=True)
        with pytest.raises(NoAuthError):
            anonymous.delete(layout.live_worker("w1"))
        with pytest.raises(NoAuthError):
            anonymous.delete(layout.topic("src.dst", "orders"))
        # The whole chain Ferry created, /ferry included, carries the ACL.
        for path in (
            "/ferry",
            layout.root,
            layout.election,
            layout.topic("src.dst", "orders"),
            layout.live_worker("w1"),
        ):
            acl, _ = ferry.get_acls(path)
            assert acl == ferry.default_acl, path
        # Ferry itself changes its nodes as before.
        ferry.set(layout.topic("src.dst", "orders"), b'{"changed": true}')
    finally:
        ferry.delete("/ferry", recursive=True)  # the chroot fixture's anonymous cleanup could not
        ferry.stop()
        ferry.close()
