"""The option that every command of the studies shares: the output directory, ``--out``, named as
``python -m nmt_lib`` names it (:func:`add_out`); its old name, ``--results-dir``, is refused in one
line that names the new one (:class:`Renamed`)."""

from __future__ import annotations

import argparse


class Renamed(argparse.Action):
    """An option that was renamed to ``new``: given, with or without a value, it stops the command
    with one line, ``PROG: error: --results-dir is now --out``, and exit status 2."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        parser.exit(2, f"{parser.prog}: error: {option_string} is now {self.new}\n")


def add_out(ap: argparse.ArgumentParser, **kwargs) -> None:
    """``--out`` on ``ap`` (``kwargs``: its ``default``, ``type``, ``help``), and ``--results-dir``
    refused."""
    ap.add_argument("--out", **kwargs)
    ap.add_argument("--results-dir", action=Renamed, new="--out")
