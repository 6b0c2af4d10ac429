"""crewbridge.acp.wire's Courier: what a session's run says reaches the editor in order, and a
prompt waiting for it to be sent never waits for ever."""

from __future__ import annotations

import asyncio

import pytest

from crewbridge.acp.wire import Courier


def test_updates_go_out_in_order_and_drain_waits_for_them():
    sent: list[int] = []

    async def send(update: int) -> None:
        await asyncio.sleep(0.001 * (5 - update))  # the first is the slowest: order still holds
        sent.append(update)

    async def main() -> None:
        courier = Courier(asyncio.get_running_loop(), send)
        for number in range(5):
            courier.notify(number)
        await asyncio.sleep(0)  # notify goes through call_soon_threadsafe
        await asyncio.wait_for(courier.drain(), 10)
        courier.close()

    asyncio.run(main())
    assert sent == [0, 1, 2, 3, 4]


def test_an_update_crew_cannot_send_fails_the_drain_and_the_pump_goes_on():
    """acp/wire.py's pump died on any error but OSError: the prompt's drain() then waited for ever."""
    sent: list[str] = []

    async def send(update: str) -> None:
        if update == "bad":
            raise TypeError("an update of a shape the SDK refuses")
        sent.append(update)

    async def main() -> None:
        courier = Courier(asyncio.get_running_loop(), send)
        courier.notify("bad")
        await asyncio.sleep(0)
        with pytest.raises(TypeError, match="shape the SDK refuses"):
            await asyncio.wait_for(courier.drain(), 10)
        courier.notify("good")
        await asyncio.sleep(0)
        await asyncio.wait_for(courier.drain(), 10)  # the next prompt's: the error was told once
        courier.close()
        await asyncio.wait_for(courier.drain(), 10)  # closed: nothing more to wait for

    asyncio.run(main())
    assert sent == ["good"]


def test_the_editor_gone_is_not_an_error():
    async def send(update: str) -> None:
        raise BrokenPipeError("the editor closed its stdin")

    async def main() -> None:
        courier = Courier(asyncio.get_running_loop(), send)
        courier.notify("lost")
        await asyncio.sleep(0)
        await asyncio.wait_for(courier.drain(), 10)
        courier.close()

    asyncio.run(main())
