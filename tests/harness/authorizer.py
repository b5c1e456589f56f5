"""A pair of extra clusters of the local stack that enforce ACLs (KRaft's StandardAuthorizer), for the
tests that need them; Ferry and the tests reach them as the super user over PLAINTEXT."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest

from ferry.common.errors import DevStackError
from ferry.devstack import processes, security
from ferry.devstack import stack as devstack


@contextmanager
def authorizer_pair(
    local_stack: devstack.Stack, monkeypatch: pytest.MonkeyPatch, ports: Mapping[str, int]
) -> Iterator[devstack.Stack]:
    """The clusters named by ``ports`` (name -> port, unless ``FERRY_DEV_PORT_<NAME>`` says otherwise),
    with an authorizer; stopped again afterwards if this call started them."""
    for name, port in ports.items():
        env = "FERRY_DEV_PORT_" + name.upper()
        monkeypatch.setenv(env, os.environ.get(env, str(port)))
    stack = local_stack.with_clusters(list(ports), authorizer=True)
    try:
        started = processes.up(stack, deadline_s=300)
    except DevStackError as exc:
        pytest.fail(f"the clusters with an authorizer do not start: {exc}", pytrace=False)
    for name in ports:
        if security.AUTHORIZER_CLASS not in stack.cluster(name).config_file.read_text():
            pytest.fail(
                f"cluster {name} runs without an authorizer (started earlier without it): stop it first", pytrace=False
            )
    yield stack
    if started:
        processes.down(stack, names=started)
        devstack.forget_extra(started)  # `ferry dev status` need not list them any more
