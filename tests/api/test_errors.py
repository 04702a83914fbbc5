from __future__ import annotations

import pickle

import pytest

from koordpy.api.errors import SpecError


@pytest.mark.parametrize(
    ("path", "message", "text"),
    [
        ("spec.containers[0].resources", "bad quantity", "spec.containers[0].resources: bad quantity"),
        ("", "bad object", "bad object"),
    ],
)
def test_spec_error_text_prefixes_the_path(path: str, message: str, text: str) -> None:
    error = SpecError(path, message)
    assert str(error) == text
    assert (error.path, error.message) == (path, message)
    assert isinstance(error, ValueError)


def test_spec_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(SpecError("a.b", "c")))
    assert (error.path, error.message, str(error)) == ("a.b", "c", "a.b: c")
