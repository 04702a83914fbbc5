"""Go duration strings (`100s`, `1h30m`, `1.5h`, `300ms`), as annotations and arguments use them."""

from __future__ import annotations

import re

from koordpy.api.errors import SpecError

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
# time.Duration is int64 nanoseconds: about 292 years
MAX_SECONDS = (2**63 - 1) / 1e9


def parse_duration(text: str, path: str = "") -> float:
    """Seconds; raises SpecError naming `path` for anything Go's time.ParseDuration would refuse."""
    if not isinstance(text, str):
        raise SpecError(path, f"duration {text!r} is not a string")
    s = text.strip()
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise SpecError(path, f"invalid duration {text!r}")
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise SpecError(
                path, f"invalid duration {text!r}: expected a number and a unit (ns, us, ms, s, m, h)"
            )
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not total <= MAX_SECONDS:
        raise SpecError(
            path, f"invalid duration {text!r}: longer than a Go duration can be (about 292 years)"
        )
    return sign * total
