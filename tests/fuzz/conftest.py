"""Hypothesis profiles of the fuzz suite.

`fuzz-ci` (the default) keeps `make test` to a few seconds: it always draws the same examples and
does not shrink a failing one (shrinking takes minutes; the printed blob replays the failure, and
the long profile shrinks). `fuzz-long` (`KOORDPY_FUZZ=long`, what `make fuzz` sets) runs for
minutes with fresh examples, shrinks failures and keeps them in .hypothesis/ to replay them first
next time. The profiles are applied per
test (tests.fuzz.harness.fuzz_settings), never loaded globally, so that the other hypothesis tests
of the session keep their own settings (Hypothesis's built-in `ci` profile included).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

from tests.fuzz.harness import CI_PROFILE, LONG_PROFILE

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    CI_PROFILE,
    max_examples=12,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    database=None,
    print_blob=True,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    LONG_PROFILE,
    max_examples=1500,
    deadline=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=_SUPPRESSED,
)
