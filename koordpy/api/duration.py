"""Go duration strings (`100s`, `1h30m`, `1.5h`, `300ms`), as annotations and arguments use them,
read as Go's time.ParseDuration reads them: exact to the nanosecond, the same refusals."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from koordpy.api.errors import SpecError

_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_TERM = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")
# time.Duration is an int64 of nanoseconds: about 292 years
_MAX_NS = 2**63 - 1
MAX_SECONDS = _MAX_NS / 1e9
# more significant digits than the largest duration in nanoseconds has
_MAX_WHOLE_DIGITS = len(str(_MAX_NS))
# a nanosecond of an hour is 3.6e12 smaller than the unit: beyond 20 digits a fraction adds less
# than a nanosecond
_MAX_FRACTION_DIGITS = 20


def parse_duration(text: str, path: str = "") -> float:
    """Seconds (negative for `-5s`); raises SpecError naming `path` for anything Go's
    time.ParseDuration would refuse."""
    if not isinstance(text, str):
        raise SpecError(path, f"duration {text!r} is not a string")
    # a text of thousands of characters is named by its start
    shown = repr(text) if len(text) <= 64 else repr(text[:48]) + f"... ({len(text)} characters)"
    s = text.strip()
    negative = False
    if s[:1] in ("-", "+"):
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise SpecError(path, f"invalid duration {shown}")
    too_long = f"invalid duration {shown}: longer than a Go duration can be (about 292 years)"
    total = Fraction(0)
    pos = 0
    while pos < len(s):
        m = _TERM.match(s, pos)
        assert m is not None  # every part of the pattern may be empty
        whole, frac, unit = m.group(1), m.group(2), m.group(3)
        if not whole and not frac:
            raise SpecError(path, f"invalid duration {shown}")
        if not unit:
            raise SpecError(path, f"missing unit in duration {shown} (ns, us, ms, s, m, h)")
        scale = _UNITS_NS.get(unit)
        if scale is None:
            raise SpecError(path, f"unknown unit {unit[:16]!r} in duration {shown} (ns, us, ms, s, m, h)")
        # Go reads the whole part into a uint64 and refuses it when it overflows ("invalid
        # duration"): thousands of digits are refused before Python is asked to convert them
        significant = whole.lstrip("0")
        if len(significant) > _MAX_WHOLE_DIGITS:
            raise SpecError(path, too_long)
        value = Fraction(int(significant or "0"))
        if frac:
            # digits past a nanosecond of an hour change nothing Go keeps (it stops reading them)
            kept = frac[:_MAX_FRACTION_DIGITS]
            value += Fraction(int(kept), 10 ** len(kept))
        total += value * scale
        # a negative duration reaches one nanosecond further, as an int64 does
        if total > _MAX_NS + negative:
            raise SpecError(path, too_long)
        pos = m.end()
    # Go truncates the fraction of a nanosecond
    seconds = math.floor(total) / 1e9
    return -seconds if negative else seconds
