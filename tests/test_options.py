"""The option every study command shares (nmt_experiments.core.options): the output directory is
``--out``, as in ``python -m nmt_lib``; the old ``--results-dir`` is refused in one line naming it."""

import argparse

import pytest

from nmt_experiments.budget import study as budget
from nmt_experiments.comparison import multi30k, recipes, report
from nmt_experiments.core.options import add_out
from nmt_experiments.pilot import study as pilot
from nmt_experiments.replicate import replication, rerun
from tools import notebooks

COMMANDS = {
    "budget": budget.main,
    "pilot": pilot.main,
    "replicate": replication.main,
    "rerun": lambda argv: rerun.main(["smoke", "RNNsearch-50", "--updates", "1", *argv]),
    "comparison": report.main,
    "recipes": recipes.main,
    "multi30k": multi30k.main,
    "tools/notebooks.py": notebooks.main,
}


def test_out_is_the_output_directory():
    ap = argparse.ArgumentParser(prog="cmd")
    add_out(ap, default="results/x")
    assert ap.parse_args([]).out == "results/x"
    assert ap.parse_args(["--out", "mine"]).out == "mine"


@pytest.mark.parametrize("value", [["old"], []])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_refuses_results_dir_naming_out(name, value, capsys):
    with pytest.raises(SystemExit) as stop:
        COMMANDS[name](["--results-dir", *value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith("error: --results-dir is now --out\n") and err.count("\n") == 1, err
