"""The ``zookeeper`` section: the ensemble, its session and its authentication."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

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


class ZookeeperTlsConfig(_Strict):
    """TLS to the ensemble's secure client port (see docs/security.md): the server's certificate is
    checked against ``ca_location``; a client certificate is sent when the ensemble asks for one.
    """

    ca_location: str = Field(min_length=1)
    """PEM file of the CA(s) that signed the servers' certificates"""
    certificate_location: str | None = None
    """PEM file of Ferry's client certificate (with key_location)"""
    key_location: str | None = None
    """PEM file of the client certificate's private key (with certificate_location)"""
    key_password: SecretStr | None = None
    """password of an encrypted key_location; e.g. ${env:FERRY_ZK_KEY_PASSWORD}"""
    check_hostname: bool = True
    """check that the server's certificate names the host Ferry connects to"""

    @model_validator(mode="after")
    def _certificate_with_key(self) -> ZookeeperTlsConfig:
        if (self.certificate_location is None) != (self.key_location is None):
            raise ValueError("certificate_location and key_location go together: give both or neither")
        return self

    def unreadable(self) -> list[str]:
        """Each of the files that cannot be read, as ``"zookeeper.tls.<key>: cannot read <path>: <why>"``."""
        files = {
            "ca_location": self.ca_location,
            "certificate_location": self.certificate_location,
            "key_location": self.key_location,
        }
        problems = []
        for key, path in files.items():
            if path is None:
                continue
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                problems.append(f"zookeeper.tls.{key}: cannot read {path}: {exc.strerror or exc}")
        return problems


class ZookeeperConfig(_Strict):
    connect: str = Field(min_length=1, description="host:port[,host:port...] of the ensemble")
    root: str = Field("/ferry", description="the path under which Ferry keeps all its nodes")
    session_timeout_s: float = Field(10.0, ge=2.0, le=120.0)
    """ZooKeeper session timeout"""
    retry_deadline_s: float = Field(30.0, gt=0)
    """how long an operation retries a lost connection"""
    auth: ZookeeperAuthConfig | None = None
    """digest authentication and ACLs on Ferry's nodes, see docs/security.md; absent: no authentication, open ACLs"""
    tls: ZookeeperTlsConfig | None = None
    """TLS to the ensemble's secure client port, see docs/security.md; absent: plaintext"""

    @field_validator("root")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/") or (value != "/" and value.endswith("/")) or "//" in value:
            raise ValueError("must be an absolute ZooKeeper path like /ferry/prod, without a trailing /")
        return value


# The producer's compression.type values (librdkafka's names).
