"""The API client's rate limit is client-go's: a token bucket of `burst` tokens, full at the start,
refilled at `qps` a second, each request taking one and waiting its turn when none is left
(golang.org/x/time/rate's Limiter.Wait, behind flowcontrol.NewTokenBucketRateLimiter)."""

from __future__ import annotations

import pytest

from koordpy.kubeapi.ratelimit import TokenBucket, client_rate_limiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _no_sleep(seconds: float) -> None:
    raise AssertionError("reserve() never sleeps")


@pytest.mark.parametrize(
    ("qps", "burst", "requests", "waits"),
    [
        # a full bucket serves `burst` requests at once, then one per 1/qps seconds, in order
        pytest.param(1.0, 3, [0.0] * 5, [0.0, 0.0, 0.0, 1.0, 2.0], id="burst-then-rate"),
        pytest.param(2.0, 1, [0.0, 0.0, 0.0], [0.0, 0.5, 1.0], id="half-second-steps"),
        # tokens come back with time, never beyond the burst
        pytest.param(1.0, 2, [0.0, 0.0, 10.0, 10.0, 10.0], [0.0, 0.0, 0.0, 0.0, 1.0], id="refilled-to-burst"),
        # a request made while others wait queues behind their reservations
        pytest.param(2.0, 1, [0.0, 0.0, 0.0, 0.25], [0.0, 0.5, 1.0, 1.25], id="queued-behind-reservations"),
        pytest.param(50.0, 100, [0.0] * 101, [0.0] * 100 + [0.02], id="kube-scheduler-defaults"),
    ],
)
def test_each_request_waits_its_turn_in_the_bucket(
    qps: float, burst: int, requests: list[float], waits: list[float]
) -> None:
    clock = Clock()
    bucket = TokenBucket(qps, burst, clock=clock, sleep=_no_sleep)
    got = []
    for at in requests:
        clock.now = at
        got.append(bucket.reserve())
    assert got == pytest.approx(waits)


async def test_wait_sleeps_for_the_reserved_time_only() -> None:
    clock = Clock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    bucket = TokenBucket(4.0, 1, clock=clock, sleep=sleep)
    for _ in range(3):
        await bucket.wait()
    assert slept == pytest.approx([0.25, 0.5])


@pytest.mark.parametrize(
    ("qps", "burst", "limit"),
    [
        pytest.param(50.0, 100, (50.0, 100), id="as-given"),
        # rest.RESTClientFor: 0 means DefaultQPS 5 and DefaultBurst 10
        pytest.param(0.0, 0, (5.0, 10), id="client-go-defaults"),
        pytest.param(20.0, 0, (20.0, 10), id="default-burst"),
        # a negative QPS: no limiter at all
        pytest.param(-1.0, 100, None, id="no-limit"),
    ],
)
def test_qps_and_burst_make_the_limiter_client_go_makes(
    qps: float, burst: int, limit: tuple[float, int] | None
) -> None:
    limiter = client_rate_limiter(qps, burst)
    assert (None if limiter is None else (limiter.qps, limiter.burst)) == limit


@pytest.mark.parametrize(("qps", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_a_bucket_that_could_never_serve_is_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(qps, burst)
