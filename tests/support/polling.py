"""Waiting for the cluster to reach a state, for end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException


async def eventually(
    probe: Callable[[], Awaitable[Any]], *, timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> Any:
    """Await `probe()` until it returns something truthy (API and connection errors count as not
    yet); fail the test after `timeout` seconds, saying what was awaited and the last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while True:
        with contextlib.suppress(ApiException, aiohttp.ClientError, OSError):
            last = await probe()
            if last:
                return last
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or probe}; last value: {last!r}")
        await asyncio.sleep(interval)
