"""RFC 3339 timestamps as the API writes them, to and from float seconds since the epoch."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

# The range a timestamp is written in: datetime's own years, 1 to 9999.
_FIRST = datetime(1, 1, 1, tzinfo=UTC).timestamp()
_LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch, or None for anything that is not a time."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, datetime):
            dt = value if value.tzinfo else value.replace(tzinfo=UTC)
            seconds = dt.timestamp()
        elif isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        elif isinstance(value, str):
            text = value.strip()
            if text.endswith("Z"):
                text = text[:-1] + "+00:00"
            dt = datetime.fromisoformat(text)
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=UTC)
            seconds = dt.timestamp()
        else:
            return None
    except (ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) else None


def format_timestamp(seconds: float) -> str:
    """RFC 3339 in UTC; times beyond what it can write (a grace period of centuries on a virtual
    clock) are written as its first or last second rather than failing."""
    clamped = min(max(seconds, _FIRST), _LAST) if math.isfinite(seconds) else _LAST
    dt = datetime.fromtimestamp(clamped, tz=UTC)
    # %Y does not pad years before 1000 on every platform
    return f"{dt.year:04d}-{dt:%m-%dT%H:%M:%SZ}"
