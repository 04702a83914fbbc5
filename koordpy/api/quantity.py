"""Kubernetes resource quantities (`500m`, `1.5Gi`, `1e3`) as exact fractions.

The accepted grammar is the one documented for resource.Quantity in k8s.io/apimachinery
(and enforced by the OpenAPI pattern of every CRD quantity field):

    quantity        ::= [sign] number [suffix]
    number          ::= digits | digits "." | digits "." digits | "." digits
    suffix          ::= binarySI | decimalSI | decimalExponent
    binarySI        ::= Ki | Mi | Gi | Ti | Pi | Ei
    decimalSI       ::= n | u | m | k | M | G | T | P | E
    decimalExponent ::= ("e" | "E") [sign] digits

Like ParseQuantity, a non-zero value is rounded away from zero to a whole number of
nano-units and a binary-suffixed value is capped at 2^63-1.
"""

from __future__ import annotations

import math
import numbers
import re
from fractions import Fraction

__all__ = [
    "QuantityError",
    "format_bytes",
    "format_milli",
    "parse_quantity",
    "to_int",
    "to_milli",
]

_QUANTITY_RE = re.compile(
    r"([+-]?)"
    r"(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))"
    r"(?:(Ki|Mi|Gi|Ti|Pi|Ei)|[eE]([+-]?[0-9]+)|(n|u|m|k|M|G|T|P|E))?"
)
_BINARY_SHIFT = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_GRAMMAR_HINT = (
    "expected a number with an optional suffix: one of Ki Mi Gi Ti Pi Ei, n u m k M G T P E, "
    "or an exponent such as e3"
)

_NANO = 9
_NANOS_PER_UNIT = 10**_NANO
_MAX_BINARY = Fraction(2**63 - 1)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# Kubernetes keeps decimal quantities of any size in a big decimal; here the magnitude is bounded so
# that a hostile exponent (`1e2000000000`) cannot make us build a gigantic integer.
_MAX_DECIMAL_DIGITS = 64
_MAX_MAGNITUDE = 10**_MAX_DECIMAL_DIGITS
# Python refuses to convert very long digit strings to int; anything this long is not a real quantity.
_MAX_TEXT_LENGTH = 1024
# Binary suffixes multiply by at most 2^60 < 10^19.
_BINARY_DIGITS_BOUND = 19

_ZERO = Fraction(0)
# Strings and ints (YAML `cpu: 2`) share one memo; the two never compare equal to each other.
_MEMO: dict[str | int, Fraction] = {}
_MEMO_LIMIT = 8192


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity; the message quotes the value."""

    value: object
    reason: str

    def __init__(self, value: object, reason: str) -> None:
        super().__init__(value, reason)
        self.value = value
        self.reason = reason

    def __str__(self) -> str:
        shown = f'"{self.value}"' if isinstance(self.value, str) else repr(self.value)
        return f"quantity {shown} is not valid: {self.reason}"


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity given as a string or as a YAML/JSON number."""
    # Exact type checks first: bool is an int subclass and must not take the int path.
    if type(value) is str:
        cached = _MEMO.get(value)
        return cached if cached is not None else _remember(value, _parse_text(value))
    if type(value) is int:
        cached = _MEMO.get(value)
        return cached if cached is not None else _remember(value, _from_integer(value))
    if isinstance(value, bool) or value is None:
        raise QuantityError(value, "expected a string or a number")
    if isinstance(value, str):
        return parse_quantity(str(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(value, "must be a finite number")
        # A JSON number reaches ParseQuantity as its text, so a float follows the string rules;
        # its shortest repr also keeps binary artefacts (0.1 -> 0.1000000000000000055...) out.
        return parse_quantity(repr(float(value)))
    if isinstance(value, numbers.Integral):
        return parse_quantity(int(value))
    raise QuantityError(value, f"expected a string or a number, got {type(value).__name__}")


def _remember(key: str | int, result: Fraction) -> Fraction:
    if len(_MEMO) >= _MEMO_LIMIT:
        # Evict the oldest entry: bounded memory with O(1) upkeep and no bookkeeping on hits.
        _MEMO.pop(next(iter(_MEMO), key), None)
    _MEMO[key] = result
    return result


def _from_integer(value: int) -> Fraction:
    if -_MAX_MAGNITUDE < value < _MAX_MAGNITUDE:
        return Fraction(value)
    raise QuantityError(value, f"magnitude must be below 1e{_MAX_DECIMAL_DIGITS}")


def _parse_text(text: str) -> Fraction:
    if not text:
        raise QuantityError(text, "must not be empty")
    if len(text) > _MAX_TEXT_LENGTH:
        raise QuantityError(text[:32] + "...", f"longer than {_MAX_TEXT_LENGTH} characters")
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise QuantityError(text, _GRAMMAR_HINT)
    sign, whole, fraction, fraction_only, binary, exponent, decimal = match.groups()
    if fraction_only is not None:
        whole, fraction = "", fraction_only
    elif fraction is None:
        fraction = ""
    significant = (whole + fraction).lstrip("0")
    if not significant:
        return _ZERO

    # value = numerator * 10**scale, with any binary multiplier folded into the numerator.
    numerator = int(significant)
    digits = len(significant)
    scale = -len(fraction)
    if binary is not None:
        numerator <<= _BINARY_SHIFT[binary]
        digits += _BINARY_DIGITS_BOUND
    elif exponent is not None:
        power = int(exponent)
        if not _INT32_MIN <= power <= _INT32_MAX:
            raise QuantityError(text, "exponent is out of range")
        scale += power
    elif decimal is not None:
        scale += _DECIMAL_EXPONENT[decimal]

    if scale + len(significant) > _MAX_DECIMAL_DIGITS:
        raise QuantityError(text, f"magnitude must be below 1e{_MAX_DECIMAL_DIGITS}")
    if scale >= 0:
        result = Fraction(numerator * 10**scale)
    elif scale >= -_NANO:
        result = Fraction(numerator, 10**-scale)
    else:
        # Finer than a nano-unit: Kubernetes rounds the magnitude up so that a tiny request
        # still asks for something.
        shift = -scale - _NANO
        nanos = 1 if shift > digits else -(-numerator // 10**shift)
        result = Fraction(nanos, _NANOS_PER_UNIT)
    if binary is not None and result > _MAX_BINARY:
        result = _MAX_BINARY
    return -result if sign == "-" else result


def to_milli(q: Fraction) -> int:
    """ceil(q * 1000), as Quantity.MilliValue(): 0.0001 cpu is 1m."""
    return -(-(q.numerator * 1000) // q.denominator)


def to_int(q: Fraction) -> int:
    """ceil(q), as Quantity.Value()."""
    return -(-q.numerator // q.denominator)


def format_milli(m: int) -> str:
    """Milli-units for messages: whole units without a suffix (2000 -> "2"), else "1500m"."""
    if m % 1000 == 0:
        return str(m // 1000)
    return f"{m}m"


_BINARY_FORMATS = tuple(sorted(((shift, suffix) for suffix, shift in _BINARY_SHIFT.items()), reverse=True))


def format_bytes(b: int) -> str:
    """Bytes for messages: the largest exact binary suffix ("64Mi"), else the plain integer."""
    if b:
        for shift, suffix in _BINARY_FORMATS:
            if b & ((1 << shift) - 1) == 0:
                return f"{b >> shift}{suffix}"
    return str(b)
