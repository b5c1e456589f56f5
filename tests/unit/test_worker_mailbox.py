"""The mailbox a watch callback hands its newest value through to the copy loop."""

from __future__ import annotations

import threading

import pytest

from ferry.worker.mailbox import Mailbox

pytestmark = pytest.mark.unit


def test_take_returns_the_newest_value_once_and_put_wakes_the_loop() -> None:
    wake = threading.Event()
    box: Mailbox[int] = Mailbox(wake)
    assert box.take() is None
    box.put(1)
    box.put(2)
    assert wake.is_set()
    assert box.take() == 2
    assert box.take() is None


def test_a_value_that_does_not_replace_the_last_one_is_dropped_even_after_a_take() -> None:
    wake = threading.Event()
    box: Mailbox[int] = Mailbox(wake)
    box.put(5, lambda last: last <= 5)
    assert box.take() == 5
    wake.clear()
    box.put(3, lambda last: last <= 3)
    assert box.take() is None
    assert not wake.is_set()
    box.put(7, lambda last: last <= 7)
    assert box.take() == 7


def test_mailboxes_share_one_wake_event() -> None:
    wake = threading.Event()
    first: Mailbox[str] = Mailbox(wake)
    second: Mailbox[str] = Mailbox(wake)
    second.put("x")
    assert wake.is_set()
    assert first.take() is None and second.take() == "x"
