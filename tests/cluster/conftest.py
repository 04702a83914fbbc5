from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.cluster.world_support import Start, world_starter
from tests.support.fakeapi import FakeApiServer


@pytest_asyncio.fixture(loop_scope="function")
async def fake() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        yield server


@pytest_asyncio.fixture(loop_scope="function")
async def start(fake: FakeApiServer) -> AsyncIterator[Start]:
    """A KubeWorld over the scripted cluster (see tests.cluster.world_support.world_starter)."""
    async for starter in world_starter(fake):
        yield starter
