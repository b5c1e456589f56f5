"""The ``zookeeper`` section: the ensemble, its session and its authentication."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from ferry.common.config.base import _Strict


class ZookeeperAuthConfig(_Strict):
    """Digest authentication, and the ACL on every node Ferry creates (see docs/security.md).

    Ferry's identity may do everything on its nodes; ``others`` may ``read`` them or do ``none``.
    Keep the secret out of the file with a placeholder: ``digest: ${env:FERRY_ZK_DIGEST}`` or
    ``digest: ${file:/etc/ferry/zk-digest}``.
    """

    digest: SecretStr
    """user:password; e.g. ${env:FERRY_ZK_DIGEST} or ${file:/etc/ferry/zk-digest}"""
    others: Literal["read", "none"] = "read"
    """what clients without Ferry's identity may do on Ferry's nodes: read | none"""

    @field_validator("digest")
    @classmethod
    def _user_and_password(cls, value: SecretStr) -> SecretStr:
        _split_digest(value.get_secret_value())
        return value

    def credentials(self) -> tuple[str, str]:
        """``(user, password)``."""
        return _split_digest(self.digest.get_secret_value())


def _split_digest(value: str) -> tuple[str, str]:
    # The message never repeats the value: it is a secret.
    user, sep, password = value.strip().partition(":")
    if not sep or not user or not password:
        raise ValueError("must be user:password, with a non-empty user and password")
    return user, password


class ZookeeperConfig(_Strict):
    connect: str = Field(min_length=1, description="host:port[,host:port...] of the ensemble")
    root: str = Field("/ferry", description="the path under which Ferry keeps all its nodes")
    session_timeout_s: float = Field(10.0, ge=2.0, le=120.0)
    """ZooKeeper session timeout"""
    retry_deadline_s: float = Field(30.0, gt=0)
    """how long an operation retries a lost connection"""
    auth: ZookeeperAuthConfig | None = None
    """digest authentication and ACLs on Ferry's nodes, see docs/security.md; absent: no authentication, open ACLs"""

    @field_validator("root")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/") or (value != "/" and value.endswith("/")) or "//" in value:
            raise ValueError("must be an absolute ZooKeeper path like /ferry/prod, without a trailing /")
        return value


# The producer's compression.type values (librdkafka's names).
