from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from koordpy.api import quantity
from koordpy.api.pod import Pod
from koordpy.api.quantity import (
    QuantityError,
    format_bytes,
    format_milli,
    parse_quantity,
    to_int,
    to_milli,
)
from koordpy.api.resources import MAX_AMOUNT, add_into, canonical_amount

KI = 1024
MI = 1024**2
GI = 1024**3
INT64_MAX = 2**63 - 1
BINARY_SUFFIXES = [("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4), ("Pi", 5), ("Ei", 6)]
DECIMAL_SUFFIXES = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("0.5", Fraction(1, 2)),
        ("1", Fraction(1)),
        ("64Mi", Fraction(64 * MI)),
        ("1G", Fraction(10**9)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e+3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("2Ki", Fraction(2048)),
        ("1.5Gi", Fraction(3 * GI, 2)),
        ("1.1Ki", Fraction(11264, 10)),
        ("100n", Fraction(100, 10**9)),
        ("1u", Fraction(1, 10**6)),
        ("5k", Fraction(5000)),
        ("1E", Fraction(10**18)),
        ("2T", Fraction(2 * 10**12)),
        ("3P", Fraction(3 * 10**15)),
        ("-1", Fraction(-1)),
        ("+5k", Fraction(5000)),
        ("-1.5Gi", Fraction(-3 * GI, 2)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("5.Mi", Fraction(5 * MI)),
        ("0", Fraction(0)),
        ("-0", Fraction(0)),
        ("000", Fraction(0)),
        ("0.0", Fraction(0)),
        ("007", Fraction(7)),
        ("0e99999999999", Fraction(0)),
    ],
)
def test_parses_kubernetes_quantity_grammar_to_exact_value(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # ParseQuantity rounds a non-zero magnitude up to whole nano-units.
        ("1e-20", Fraction(1, 10**9)),
        ("-1e-20", Fraction(-1, 10**9)),
        ("0.0000000001", Fraction(1, 10**9)),
        ("1.0000000001", Fraction(10**9 + 1, 10**9)),
        ("1.5n", Fraction(2, 10**9)),
        ("-0.0009999999", Fraction(-1, 1000)),
        # ...and caps binary-suffixed values at the largest int64.
        ("99999999999Ei", Fraction(INT64_MAX)),
        ("8Ei", Fraction(INT64_MAX)),
        ("-8Ei", Fraction(-INT64_MAX)),
        ("7Ei", Fraction(7 * 2**60)),
    ],
)
def test_rounds_below_nano_units_and_caps_binary_values_like_parse_quantity(
    text: str, value: Fraction
) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("0.5", 500),
        ("1", 1000),
        ("2", 2000),
        ("100n", 1),
        ("0.0001", 1),
        ("1.0001", 1001),
        ("1u", 1),
        ("250m", 250),
        ("1.5", 1500),
        ("0", 0),
        ("-1", -1000),
        ("-0.0009999999", -1),
    ],
)
def test_to_milli_rounds_up_like_milli_value(text: str, milli: int) -> None:
    assert to_milli(parse_quantity(text)) == milli


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Fraction(3, 2), 2),
        (Fraction(1), 1),
        (Fraction(1, 10**9), 1),
        (Fraction(0), 0),
        (Fraction(-3, 2), -1),
        (Fraction(64 * MI), 64 * MI),
    ],
)
def test_to_int_rounds_up_like_value(value: Fraction, expected: int) -> None:
    assert to_int(value) == expected


@pytest.mark.parametrize(
    ("number", "value"),
    [
        (2, Fraction(2)),
        (0, Fraction(0)),
        (-3, Fraction(-3)),
        (0.5, Fraction(1, 2)),
        (0.1, Fraction(1, 10)),
        (1.1, Fraction(11, 10)),
        (1e-05, Fraction(1, 100000)),
        (2.0, Fraction(2)),
        (1e20, Fraction(10**20)),
    ],
)
def test_yaml_numbers_are_taken_at_their_decimal_value(number: int | float, value: Fraction) -> None:
    assert parse_quantity(number) == value


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "1.2.3",
        "10 cores",
        "1Kb",
        "e3",
        "1e",
        "1e+",
        "1e1.5",
        "Mi",
        "ki",
        ".",
        "-",
        "+",
        " 1",
        "1 ",
        "1K",
        "1mi",
        "0.1am",
        "1i",
        "1 Gi",
        "1e3Mi",
        "one",
        "1e99999999999",
        "1" + "0" * 70,
        "1" * 2000,
    ],
)
def test_rejects_strings_outside_the_grammar(bad: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


@pytest.mark.parametrize("bad", [True, False, None, math.nan, math.inf, -math.inf, [1], {"cpu": 1}, 10**70])
def test_rejects_non_quantity_values(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_error_message_quotes_the_bad_value() -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity("10 cores")
    assert str(caught.value).startswith('quantity "10 cores" is not valid: ')
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("milli", "text"), [(1500, "1500m"), (2000, "2"), (0, "0"), (1, "1m"), (-1500, "-1500m")]
)
def test_format_milli_drops_the_suffix_for_whole_units(milli: int, text: str) -> None:
    assert format_milli(milli) == text


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (64 * MI, "64Mi"),
        (GI, "1Gi"),
        (1536, "1536"),
        (1536 * KI, "1536Ki"),
        (0, "0"),
        (1, "1"),
        (-KI, "-1Ki"),
        (2**60, "1Ei"),
    ],
)
def test_format_bytes_uses_the_largest_exact_binary_suffix(size: int, text: str) -> None:
    assert format_bytes(size) == text


def test_memo_stays_bounded() -> None:
    for n in range(quantity._MEMO_LIMIT + 100):
        parse_quantity(f"{n}Ki")
    assert len(quantity._MEMO) <= quantity._MEMO_LIMIT
    assert parse_quantity("5Ki") == 5 * KI


@given(st.integers(-(2**40), 2**40), st.sampled_from(BINARY_SUFFIXES))
def test_binary_suffix_multiplies_by_powers_of_1024(n: int, suffix: tuple[str, int]) -> None:
    text, power = suffix
    expected = n * 1024**power
    assume(abs(expected) <= INT64_MAX)
    assert parse_quantity(f"{n}{text}") == expected


@given(st.integers(-(10**15), 10**15), st.sampled_from(DECIMAL_SUFFIXES))
def test_decimal_suffix_multiplies_by_powers_of_ten(n: int, suffix: tuple[str, int]) -> None:
    text, power = suffix
    assert parse_quantity(f"{n}{text}") == Fraction(n) * Fraction(10) ** power


@given(st.integers(-(10**12), 10**12), st.integers(-9, 30), st.sampled_from(["e", "E"]))
def test_exponent_multiplies_by_powers_of_ten(n: int, power: int, letter: str) -> None:
    assert parse_quantity(f"{n}{letter}{power}") == Fraction(n) * Fraction(10) ** power


@given(st.integers(0, 10**9), st.text(alphabet="0123456789", max_size=15))
def test_to_milli_is_the_ceiling_of_a_thousand_times_the_value(whole: int, fraction: str) -> None:
    text = f"{whole}.{fraction}" if fraction else str(whole)
    assert to_milli(parse_quantity(text)) == math.ceil(Decimal(text) * 1000)


@given(st.integers(-(10**15), 10**15))
def test_format_milli_round_trips(milli: int) -> None:
    assert to_milli(parse_quantity(format_milli(milli))) == milli


@given(st.integers(-(2**62), 2**62))
def test_format_bytes_round_trips(size: int) -> None:
    assert to_int(parse_quantity(format_bytes(size))) == size


@given(st.integers(-(2**40), 2**40), st.sampled_from(BINARY_SUFFIXES))
def test_format_bytes_of_a_binary_multiple_has_a_suffix(n: int, suffix: tuple[str, int]) -> None:
    assume(n != 0)
    size = n * 1024 ** suffix[1]
    assume(abs(size) <= INT64_MAX)
    assert format_bytes(size)[-1] == "i"
    assert parse_quantity(format_bytes(size)) == size


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_floats_parse_to_their_shortest_decimal_repr(number: float) -> None:
    exact = Fraction(Decimal(repr(number)))
    parsed = parse_quantity(number)
    # Only the nano-unit rounding may move the value, and by less than one nano-unit.
    assert abs(parsed - exact) < Fraction(1, 10**9)
    assert parsed == exact or (exact * 10**9).denominator != 1


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        pytest.param("cpu", "1e18", MAX_AMOUNT, id="cpu-1e18-saturates"),
        pytest.param("memory", "1e19", MAX_AMOUNT, id="memory-1e19-saturates"),
        pytest.param("nvidia.com/gpu", 10**30, MAX_AMOUNT, id="yaml-integer-beyond-int64-saturates"),
        pytest.param("memory", "8Ei", MAX_AMOUNT, id="binary-suffix-beyond-the-bound-saturates"),
        pytest.param("cpu", "9007199254740m", 9007199254740, id="below-the-bound-exact"),
    ],
)
def test_amounts_saturate_at_the_largest_the_scheduler_represents(
    name: str, value: object, expected: int
) -> None:
    assert canonical_amount(name, value, f"requests.{name}") == expected


def test_summed_requests_saturate_too() -> None:
    total = {"cpu": MAX_AMOUNT - 1}
    add_into(total, {"cpu": MAX_AMOUNT})
    assert total == {"cpu": MAX_AMOUNT}


@pytest.mark.parametrize(
    ("containers", "field"),
    [
        pytest.param(
            [{"cpu": "1e18"}], "spec.containers[0].resources.requests.cpu", id="one-container-beyond"
        ),
        pytest.param(
            [{"cpu": "1"}, {"memory": "8Ei"}],
            "spec.containers[1].resources.requests.memory",
            id="second-beyond",
        ),
        pytest.param([{"cpu": "5e12"}, {"cpu": "5e12"}], "spec", id="containers-together-beyond"),
    ],
)
def test_a_pod_asking_beyond_the_bound_is_refused_naming_the_field(
    containers: list[dict[str, str]], field: str
) -> None:
    pod = Pod.from_dict(
        {
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {"name": f"c{i}", "resources": {"requests": requests}}
                    for i, requests in enumerate(containers)
                ]
            },
        }
    )
    assert pod.spec_error is not None
    assert pod.spec_error.path == field
    assert "than koordpy schedules" in pod.spec_error.message
