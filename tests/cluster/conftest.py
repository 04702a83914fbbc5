from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.support.fakeapi import FakeApiServer


@pytest_asyncio.fixture(loop_scope="function")
async def fake() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        yield server
