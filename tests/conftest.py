"""What several test modules share: the two backends that every identity test runs on."""

import pytest

BACKENDS = ("reference", "fast")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """``"reference"`` (the paper modules) and ``"fast"`` (:func:`nmt_lib.fast.accelerate`)."""
    return request.param
