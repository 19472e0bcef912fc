"""What several test modules share: the two backends that every identity test runs on, and the
headless browser of the book's and the translator's checks."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

BACKENDS = ("reference", "fast")
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """``"reference"`` (the paper modules) and ``"fast"`` (:func:`nmt_lib.fast.accelerate`)."""
    return request.param


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium, installed with apt-get if missing and we are root; else skip."""
    if not Path(CHROMIUM).exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], capture_output=True, timeout=300, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "chromium"], capture_output=True, timeout=600, env=env
        )
    if not Path(CHROMIUM).exists():
        pytest.skip(
            "the browser checks did not run: Debian's chromium is missing and could not be "
            "installed (`apt-get install -y chromium` needs root and the Debian archive)"
        )
    return CHROMIUM
