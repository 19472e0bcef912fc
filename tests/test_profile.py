"""The runs a profile's command line and replication select (nmt_lib.profile.load_runs)."""

import pytest

from nmt_lib.config import ConfigError
from nmt_lib.profile import load_runs


def test_the_data_directory_beats_an_override_and_the_smoke_default_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    toy = load_runs("smoke").runs["RNNsearch-50"].data.data_dir
    assert toy.startswith(str(tmp_path / "cache"))  # the generated toy corpus
    mine = {"data_dir": str(tmp_path / "mine")}
    assert load_runs("smoke", data={**mine}).runs["RNNsearch-50"].data.data_dir == mine["data_dir"]
    given = load_runs("smoke", tmp_path / "given", data={**mine})
    assert {r.data.data_dir for r in given.runs.values()} == {str(tmp_path / "given")}


def test_only_the_runs_asked_for_in_their_order_and_an_unknown_one_named(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    prof = load_runs("smoke", runs=["RNNsearch-50", "RNNencdec-30"], train={"max_updates": 3})
    assert list(prof.runs) == ["RNNsearch-50", "RNNencdec-30"]
    assert {r.train.max_updates for r in prof.runs.values()} == {3}
    with pytest.raises(ConfigError, match=r"smoke\.toml: no run\(s\) \['RNNsearch-99'\]"):
        load_runs("smoke", runs=["RNNsearch-99"])
