"""The values of `koordpy run`'s flags, read as kube-scheduler's pflag and Go read them: booleans as
strconv.ParseBool, durations as time.ParseDuration, verbosity, ports, feature gates."""

from __future__ import annotations

import argparse
import math

from koordpy.api.duration import parse_duration
from koordpy.api.errors import SpecError


class FlagError(ValueError):
    """A flag value kube-scheduler would refuse (exit status 2)."""


# ---------------------------------------------------------------------------------------------- values
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def parse_bool(text: str) -> bool:
    """A boolean flag's value, as Go's strconv.ParseBool reads it."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f'invalid argument "{text}": strconv.ParseBool: parsing "{text}"')


def parse_flag_duration(text: str) -> str:
    """A Go duration flag's value (kept as written: it is what --write-config-to records)."""
    try:
        seconds = parse_duration(text)
    except SpecError:
        raise argparse.ArgumentTypeError(
            f'invalid argument "{text}": time: invalid duration "{text}" (write e.g. 15s, 1m30s, 500ms)'
        ) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": must not be negative')
    return text


def parse_positive_duration(text: str) -> str:
    if parse_duration(parse_flag_duration(text)) <= 0:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": must be greater than zero')
    return text


def parse_verbosity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": not a number') from None
    if value < 0:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": must be 0 or more')
    return value


def parse_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": not a number of seconds') from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": must be a finite number >= 0')
    return value


def parse_port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": not a port number') from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": must be between 0 and 65535')
    return value


def parse_feature_gates(text: str) -> tuple[tuple[str, bool], ...]:
    """`--feature-gates`, as component-base's featureGate.Set reads it: `Name=bool` pairs split on
    commas, blanks around each ignored."""
    gates = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise argparse.ArgumentTypeError(
                f'invalid argument "{text}": missing bool value for {name or item}'
            )
        try:
            gates.append((name, parse_bool(value)))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f'invalid argument "{text}": invalid value of {name}={value}, err: strconv.ParseBool'
            ) from None
    return tuple(gates)


def go_duration(seconds: float) -> str:
    """`seconds` as Go's time.Duration.String() writes it (`15s`, `1m30s`, `500ms`)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return f"{sign}{_fraction(ns, size)}{unit}"
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _fraction(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
