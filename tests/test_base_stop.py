"""crewbridge.base.stop: a Stop is set once, from any thread, and `set()` calls every callback given to
`on_set` — at once and once — so a run's CLIs, a cancelled MCP request's processes and a native call
the CLI cancels all end when it is set, wherever their waits are. Threads here wait with generous
bounds only so that a broken Stop fails the test instead of hanging it; nothing is timed."""

from __future__ import annotations

import threading

import pytest

from crewbridge.base.stop import Stop

BOUND = 30  # seconds a thread waits before the test calls the wait failed (never a speed claim)


def test_a_new_stop_is_not_set_and_calls_nothing():
    stop, called = Stop(), []
    stop.on_set(lambda: called.append("end"))
    assert not stop.is_set() and called == []


def test_set_calls_every_callback_in_the_order_given_and_is_then_set():
    stop, called = Stop(), []
    for name in ("cli", "commands", "question"):
        stop.on_set(lambda name=name: called.append(name))
    stop.set()
    assert stop.is_set() and called == ["cli", "commands", "question"]


def test_a_callback_that_raises_keeps_none_of_the_others_from_running_and_its_error_is_raised_after():
    stop, called = Stop(), []

    def broken() -> None:
        raise OSError("the CLI's group is gone")

    stop.on_set(lambda: called.append("first cli"))
    stop.on_set(broken)
    stop.on_set(lambda: called.append("second cli"))
    with pytest.raises(OSError, match="group is gone"):
        stop.set()
    assert called == ["first cli", "second cli"] and stop.is_set()


def test_a_stop_is_set_once_and_its_callbacks_called_once():
    stop, called = Stop(), []
    stop.on_set(lambda: called.append("end"))
    stop.set()
    stop.set()
    assert stop.is_set() and called == ["end"]


def test_a_callback_given_once_the_stop_is_set_is_called_at_once_on_the_callers_thread():
    stop, called = Stop(), []
    stop.set()
    stop.on_set(lambda: called.append(threading.get_ident()))
    assert called == [threading.get_ident()]
    stop.set()
    assert len(called) == 1  # and never again


def test_a_callback_that_gives_another_while_the_stop_is_set_has_it_called_too():
    stop, called = Stop(), []
    stop.on_set(lambda: stop.on_set(lambda: called.append("given while setting")))
    stop.set()
    assert called == ["given while setting"]


def test_a_wait_on_another_thread_ends_when_the_stop_is_set_here():
    stop, ended = Stop(), threading.Event()
    woke: list[bool] = []

    def waiter() -> None:  # as a tool's command or a CLI's read would: until the stop ends it
        released = threading.Event()
        stop.on_set(released.set)
        ended.set()
        woke.append(released.wait(BOUND))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert ended.wait(BOUND)  # the waiter has given its callback
    stop.set()
    thread.join(BOUND)
    assert not thread.is_alive() and woke == [True]


def test_set_from_another_thread_runs_the_callbacks_on_that_thread():
    stop, on = Stop(), []
    stop.on_set(lambda: on.append(threading.get_ident()))
    setter = threading.Thread(target=stop.set)
    setter.start()
    setter.join(BOUND)
    assert stop.is_set() and on == [setter.ident] and on != [threading.get_ident()]


def test_many_threads_setting_at_once_call_each_callback_once():
    stop, called, lock = Stop(), [], threading.Lock()
    for n in range(50):

        def record(n: int = n) -> None:
            with lock:
                called.append(n)

        stop.on_set(record)
    start = threading.Barrier(8)

    def setter() -> None:
        start.wait(BOUND)
        stop.set()

    threads = [threading.Thread(target=setter) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND)
    assert sorted(called) == list(range(50))


def given_while_set() -> list[str]:
    """What a callback given on one thread while another sets the stop is called as."""
    stop, called = Stop(), []
    start = threading.Barrier(2)

    def giver() -> None:
        start.wait(BOUND)
        stop.on_set(lambda: called.append("end"))

    thread = threading.Thread(target=giver)
    thread.start()
    start.wait(BOUND)
    stop.set()
    thread.join(BOUND)
    return called


def test_a_callback_given_while_another_thread_sets_the_stop_is_called_exactly_once():
    for _ in range(50):  # the race each way: given before the set, or after it
        assert given_while_set() == ["end"]
