"""Client-side rate limiting of API requests, as client-go does it.

client-go gives every REST client `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`, a
golang.org/x/time/rate limiter: a bucket of `burst` tokens, full at the start, refilled at `qps`
tokens a second; each request takes one, and when none is left it reserves the next one to come and
waits for it (so waiting requests go in the order they asked). A QPS of 0 means client-go's
defaults (5, with a burst of 10 when the burst is 0 too); a negative QPS means no limit
(`rest.RESTClientFor` creates no limiter then).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

# client-go's rest.DefaultQPS and rest.DefaultBurst, for a configuration that leaves them at 0
DEFAULT_QPS = 5.0
DEFAULT_BURST = 10


class TokenBucket:
    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if qps <= 0:
            raise ValueError(f"a token bucket needs a positive rate, got {qps}")
        if burst < 1:
            raise ValueError(f"a token bucket needs a burst of at least 1, got {burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._at = clock()

    def reserve(self) -> float:
        """Take a token now or reserve the next one; the seconds to wait before using it."""
        now = self._clock()
        if now > self._at:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
            self._at = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def wait(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await self._sleep(delay)


def client_rate_limiter(qps: float, burst: int) -> TokenBucket | None:
    """The limiter client-go's `rest.RESTClientFor` would build for `qps` and `burst` (None: no
    limit)."""
    if qps == 0:
        qps = DEFAULT_QPS
    if burst == 0:
        burst = DEFAULT_BURST
    if qps < 0:
        return None
    return TokenBucket(qps, burst)
