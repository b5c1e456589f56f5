"""What the local stack's servers read from disk: ZooKeeper's ``zoo.cfg``, a broker's
``server.properties`` (and, for releases that log through log4j 1, its ``log4j.properties``), a
registry's ``application.properties``; and the shipped ``log4j2.xml`` (:data:`LOG4J2_CONFIG`).

Rendering is pure (a :class:`~ferry.devstack.stack.Server` in, the file's text out);
:func:`write_server_files` writes them into the server's folder before it starts.
"""

from __future__ import annotations

from pathlib import Path

from ferry.devstack.security import (
    KEYSTORE_PASSWORD,
    SASL_MECHANISM,
    SUPER_USER,
    broker_keystore_file,
    ca_file,
    zookeeper_keystore_file,
)
from ferry.devstack.stack import Server

# Shipped inside the package (package data), so an installed Ferry has it too.
LOG4J2_CONFIG = Path(__file__).resolve().parent / "log4j2.xml"

# log4j 1 (Kafka 3.x, 2.x): the same file and format as log4j2.xml.
LOG4J1_CONFIG = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${ferry.log.file}
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.kafka.controller=INFO
log4j.logger.org.apache.zookeeper=WARN
"""


def write_server_files(server: Server) -> None:
    """Writes ``server``'s configuration into its folder (and a broker's log4j 1 file when its release needs it)."""
    server.home.mkdir(parents=True, exist_ok=True)
    server.config_file.write_text(config_text(server))
    if server.kind == "kafka" and not server.kafka_version.log4j2:
        server.log4j1_config_file.write_text(LOG4J1_CONFIG)


def config_text(server: Server) -> str:
    """The text of ``server``'s configuration file (:attr:`Server.config_file`)."""
    writers = {"zookeeper": zookeeper_config, "registry": registry_config}
    return writers.get(server.kind, kafka_config)(server)


def zookeeper_config(server: Server) -> str:
    return "\n".join(
        [
            "tickTime=2000",
            f"dataDir={server.home / 'data'}",
            f"clientPort={server.port}",
            "clientPortAddress=127.0.0.1",
            "maxClientCnxns=0",
            # The admin server would take port 8080; kazoo's server_version() needs the `envi` 4lw.
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            # Tests expire sessions on purpose; let them ask for short ones.
            "minSessionTimeout=2000",
            *(_zookeeper_tls_lines(server) if server.tls else []),
            "",
        ]
    )


def _zookeeper_tls_lines(server: Server) -> list[str]:
    return [
        # TLS on a second port (Netty serves both); PEM key store and trust store (ZooKeeper 3.8+).
        f"secureClientPort={server.tls_port}",
        "secureClientPortAddress=127.0.0.1",
        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
        f"ssl.keyStore.location={zookeeper_keystore_file()}",
        "ssl.keyStore.type=PEM",
        f"ssl.trustStore.location={ca_file()}",
        "ssl.trustStore.type=PEM",
        # A client certificate is checked when sent, not required: clients may trust the server only.
        "ssl.clientAuth=want",
    ]


def kafka_config(server: Server) -> str:
    version = server.kafka_version
    # A KRaft cluster's first broker is its controller too.
    controller = version.kraft and server.node_id == 1
    listeners = ",".join(
        [
            f"PLAINTEXT://127.0.0.1:{server.port}",
            *([f"CONTROLLER://127.0.0.1:{server.controller_port}"] if controller else []),
            f"SASL_SSL://{server.sasl_ssl_address}",
        ]
    )
    props = {
        **_metadata_config(server, controller),
        "listeners": listeners,
        "advertised.listeners": listeners,
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        # The secured client listener: TLS with the stack's own CA, SCRAM-SHA-512 users.
        "sasl.enabled.mechanisms": SASL_MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(broker_keystore_file()),
        "ssl.keystore.password": KEYSTORE_PASSWORD,
        "ssl.key.password": KEYSTORE_PASSWORD,
        "log.dirs": str(server.home / "data"),
        # Kafka's own topics have one replica (on a cluster of several brokers too: it needs only one).
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "group.initial.rebalance.delay.ms": "0",
        # As in production: Ferry must create what it writes to.
        "auto.create.topics.enable": "false",
        # Two cores: small thread pools, and a cleaner buffer that does not eat the heap.
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": "2097152",
        "num.partitions": "1",
    }
    if server.authorizer:
        props.update(
            {
                "authorizer.class.name": version.authorizer,
                "allow.everyone.if.no.acl.found": "false",
                "super.users": SUPER_USER,
            }
        )
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _metadata_config(server: Server, controller: bool) -> dict[str, str]:
    """Where a broker's cluster metadata lives: its KRaft quorum, or (ZooKeeper mode) its ZooKeeper chroot."""
    version = server.kafka_version
    if not version.kraft:
        return {
            "broker.id": str(server.node_id),
            "zookeeper.connect": server.zookeeper,
            # `up` starts ZooKeeper and the brokers together: a broker waits for ZooKeeper to answer.
            "zookeeper.connection.timeout.ms": "60000",
            # A broker killed with -9 holds its registration until its session expires: keep that short.
            "zookeeper.session.timeout.ms": "6000",
        }
    quorum = (
        {"controller.quorum.bootstrap.servers": f"127.0.0.1:{server.quorum_port}"}
        if version.dynamic_quorum
        else {"controller.quorum.voters": f"1@127.0.0.1:{server.quorum_port}"}
    )
    return {
        "process.roles": "broker,controller" if controller else "broker",
        "node.id": str(server.node_id),
        "controller.listener.names": "CONTROLLER",
        **quorum,
    }


def registry_config(server: Server) -> str:
    # Quarkus reads this file (quarkus.config.locations); in-memory H2 storage, no auth.
    return "\n".join(
        [
            f"quarkus.http.port={server.port}",
            "quarkus.http.host=127.0.0.1",
            "quarkus.log.console.level=WARN",
            "quarkus.log.file.enable=true",
            f"quarkus.log.file.path={server.log_file}",
            "",
        ]
    )
