"""What several test modules share: the two backends that every identity test runs on, the
headless browser of the book's and the translator's checks, one trained toy run (:func:`toy_trained`)
and the set-up of a study on the toy corpus (:func:`study_dir`)."""

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

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


class ToyRun(NamedTuple):
    """A trained toy run (:func:`toy_trained`): its root (the toy corpus in ``wmt/``, the caches and
    checkpoints in ``cache/``), config, prepared data, checkpoint directory and results directory."""

    root: Path
    cfg: object
    prep: object
    ckpt: Path
    out: Path


@pytest.fixture(scope="session")
def toy_trained(tmp_path_factory) -> ToyRun:
    """The smoke profile's RNNsearch-50 trained for 2 updates on the toy corpus
    (:func:`nmt_lib.data.fixtures.toy_run`) and evaluated, once for the session: read it, never
    change it (a test that does works on a copy)."""
    from nmt_lib.data import fixtures
    from nmt_lib.evaluate import evaluate_run
    from nmt_lib.train import train_run

    root = tmp_path_factory.mktemp("toy-trained")
    cfg, prep = fixtures.toy_run(root, max_updates=2)
    out = root / "runs" / "r"
    ckpt = Path(train_run(cfg, out, prep, progress=False)["checkpoint_dir"])
    evaluate_run(
        cfg, out, prep, checkpoint=ckpt, nll_sentences=5, figure_sources=(), progress=False
    )
    return ToyRun(root, cfg, prep, ckpt, out)


@pytest.fixture(scope="session")
def study_dir(tmp_path_factory):
    """A maker of a study's directory on the toy corpus: ``with study_dir(name, profile, **sizes)
    as root`` writes the corpus into ``root/wmt`` (``sizes``: of
    :func:`nmt_lib.data.fixtures.write_toy_wmt`), the profile's text into ``root/<name>.toml``
    (its ``data_dir`` that corpus) and keeps the caches and checkpoints under ``root/cache``
    (``NMT_CACHE``) inside the block."""
    from nmt_lib.data import fixtures

    @contextlib.contextmanager
    def make(name: str, profile: str, **sizes):
        root = tmp_path_factory.mktemp(name)
        fixtures.write_toy_wmt(root / "wmt", **sizes)
        where = f'train = ["toy"]\ndata_dir = "{root / "wmt"}"'
        (root / f"{name}.toml").write_text(profile.replace('train = ["toy"]', where, 1))
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NMT_CACHE", str(root / "cache"))
            yield root

    return make
