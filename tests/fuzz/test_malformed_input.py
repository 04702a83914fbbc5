"""Malformed input: a valid scenario with one field of one object damaged goes through the command
in-process and ends cleanly, as the contract says: a report (exit 0), or exit 2 with a message that
names the input and the document. Never a traceback, printed or logged, and never a pod left
pending by an internal error."""

from __future__ import annotations

import pytest
from hypothesis import given

from tests.fuzz.harness import clean_outcome_problems, fuzz_settings, run_cli, to_yaml
from tests.fuzz.known_bugs import COUNT_FIELDS, QUANTITY_FIELDS, hits_known_bug
from tests.fuzz.strategies import Damaged, Path, damaged_scenarios, gang_annotation_garbage

pytestmark = pytest.mark.fuzz


def _assert_clean(damaged: Damaged) -> None:
    text = to_yaml(damaged.docs)
    problems = clean_outcome_problems(run_cli(text))
    assert not problems, "\n".join(["", damaged.damage.describe(), *problems, "", "scenario:", text])


@fuzz_settings(share=1.0)
@given(damaged_scenarios(exclude=hits_known_bug))
def test_damaged_input_is_rejected_with_a_located_message_or_simulated(damaged: Damaged) -> None:
    _assert_clean(damaged)


@fuzz_settings(share=0.5)
@given(gang_annotation_garbage())
def test_garbled_gang_annotations_are_reported_not_raised(damaged: Damaged) -> None:
    _assert_clean(damaged)


def _object_spec(kind: str, path: Path) -> bool:
    return path == ("spec",)


def _api_version(kind: str, path: Path) -> bool:
    return path == ("apiVersion",)


def _port(kind: str, path: Path) -> bool:
    return len(path) >= 2 and path[-2] == "ports" and isinstance(path[-1], int)


def _quantity(kind: str, path: Path) -> bool:
    return len(path) >= 2 and path[-2] in QUANTITY_FIELDS


def _count(kind: str, path: Path) -> bool:
    return bool(path) and path[-1] in COUNT_FIELDS


@fuzz_settings(share=0.25)
@given(damaged_scenarios(where=_object_spec, families=("delete", "null", "type", "swap")))
def test_object_spec_that_is_not_an_object_is_rejected_cleanly(damaged: Damaged) -> None:
    _assert_clean(damaged)


@fuzz_settings(share=0.25)
@given(damaged_scenarios(where=_api_version, families=("type", "swap")))
def test_api_version_that_is_not_a_string_is_rejected_cleanly(damaged: Damaged) -> None:
    _assert_clean(damaged)


@fuzz_settings(share=0.25)
@given(damaged_scenarios(where=_port, child="protocol", families=("type", "swap", "enum")))
def test_port_protocol_that_is_not_a_string_is_reported_not_raised(damaged: Damaged) -> None:
    _assert_clean(damaged)


@fuzz_settings(share=0.25)
@given(damaged_scenarios(where=_quantity, families=("huge",)))
def test_huge_quantities_are_rejected_or_saturated_cleanly(damaged: Damaged) -> None:
    _assert_clean(damaged)


@fuzz_settings(share=0.25)
@given(damaged_scenarios(where=_count, families=("huge",)))
def test_huge_replica_counts_are_rejected_cleanly(damaged: Damaged) -> None:
    _assert_clean(damaged)
