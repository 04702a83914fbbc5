"""The values of `koordpy run`'s flags, read as kube-scheduler's pflag and Go read them: booleans as
strconv.ParseBool, durations as time.ParseDuration, numbers as strconv reads them into the flag's Go
type (int32, float32), IP addresses as net.ParseIP, verbosity, ports, feature gates."""

from __future__ import annotations

import argparse
import ipaddress
import math
import re

from koordpy.api.duration import parse_duration
from koordpy.api.errors import SpecError
from koordpy.config.numbers import float_problem, int_problem


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
            f'invalid argument "{_shown(text)}": time: invalid duration "{_shown(text)}" (write e.g. 15s, '
            "1m30s, 500ms)"
        ) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": must not be negative')
    return text


def parse_positive_duration(text: str) -> str:
    if parse_duration(parse_flag_duration(text)) <= 0:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": must be greater than zero')
    return text


# what strconv.ParseInt reads in base 10 (Python's int() also takes blanks and underscores)
_GO_INT = re.compile(r"[+-]?[0-9]+")


def _shown(text: str) -> str:
    return text if len(text) <= 64 else f"{text[:48]}... ({len(text)} characters)"


def parse_int32(text: str) -> int:
    """An int32 flag's value, as strconv.ParseInt reads one in base 10 into a Go int32."""
    if not _GO_INT.fullmatch(text):
        raise argparse.ArgumentTypeError(f'invalid argument "{_shown(text)}": not a whole number')
    significant = text.lstrip("+-").lstrip("0")
    if len(significant) > 10 or int_problem(int(text), 32):
        raise argparse.ArgumentTypeError(
            f'invalid argument "{_shown(text)}": strconv.ParseInt: value out of range (a Go int32)'
        )
    return int(text)


def parse_verbosity(text: str) -> int:
    """-v, klog's Level: an int32 (negative levels log nothing more than 0, and are refused)."""
    try:
        value = parse_int32(text)
    except argparse.ArgumentTypeError:
        if _GO_INT.fullmatch(text):
            raise
        raise argparse.ArgumentTypeError(f'invalid argument "{_shown(text)}": not a number') from None
    if value < 0:
        raise argparse.ArgumentTypeError(f'invalid argument "{text}": must be 0 or more')
    return value


def parse_qps(text: str) -> float:
    """--kube-api-qps, a float32 (pflag's Float32Var). A negative QPS is taken as client-go takes
    it (no client-side limit); NaN and infinity, which client-go would hand its token bucket as
    they are, are refused, as clientConnection.qps refuses them."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'invalid argument "{_shown(text)}": not a number') from None
    if problem := float_problem(value, 32):
        raise argparse.ArgumentTypeError(f'invalid argument "{_shown(text)}": {problem}')
    return value


def parse_ip(text: str) -> str:
    """An IP address flag's value (pflag's IPVar: net.ParseIP of the trimmed text)."""
    address = text.strip()
    try:
        # net.ParseIP takes no IPv6 zone (fe80::1%eth0); Python's reader does
        if "%" in address:
            raise ValueError(address)
        ipaddress.ip_address(address)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'invalid argument "{_shown(text)}": failed to parse IP: "{_shown(text)}"'
        ) from None
    return address


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
