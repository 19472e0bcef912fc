"""Command line: ``python -m nmt_lib train|translate|evaluate|pack`` (also installed as ``nmt``).

Examples::

    python -m nmt_lib train --profile smoke --data-dir data/toy --run RNNsearch-50
    python -m nmt_lib train --profile lite --set train.max_updates=100 --set search.beam=5
    echo "The cat sleeps." | python -m nmt_lib translate --profile smoke --run RNNsearch-50
    python -m nmt_lib evaluate --profile smoke --data-dir data/toy
    python -m nmt_lib pack --profile gpu --run RNNsearch-50 pack/  # then elsewhere:
    python -m nmt_lib train --profile gpu --run RNNsearch-50 --set data.packed=pack/

Results of run ``R`` go to ``<out>/runs/<R>`` (``--out`` defaults to ``results/<profile>``);
checkpoints to ``<cache>/ckpt/...`` (:func:`nmt_lib.checkpoint.default_checkpoint_dir`). Several
GPUs: ``torchrun --nproc-per-node N -m nmt_lib train --profile gpu --run-name RNNsearch-50``
(torchrun would take ``--run`` for an abbreviation of its own ``--run-path``).

``translate`` reads its input line by line, each line Unicode NFC without a byte-order mark (as the
corpora are read: :func:`nmt_lib.data.readers.normal`); a line of more than ``--max-words`` words
(default :data:`MAX_WORDS`), which would decode for hours, is translated as an empty line, and
named on standard error (exit status 1).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

from . import data, translate
from .config import ConfigError, home, run_dir_name
from .evaluate import evaluate_run
from .io import atomic_write
from .loading import load_for_run
from .profile import load_runs
from .runtime import resolve_device
from .train import train_run
from .translate import Output

SECTIONS = ("model", "data", "train", "search")


def parse_sets(items: list[str]) -> dict[str, dict]:
    """``["train.max_updates=100", ...]`` -> ``{"train": {"max_updates": 100}}``; values are TOML
    (``5``, ``1e-6``, ``true``, ``"x"``, ``["a", "b"]``), bare words are strings."""
    out: dict[str, dict] = {}
    for item in items:
        key, eq, value = item.partition("=")
        sec, dot, name = key.strip().partition(".")
        if not eq or not dot or not name:
            raise ConfigError(
                f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. train.max_updates=5"
            )
        if sec not in SECTIONS:
            raise ConfigError(f"--set {item!r}: unknown section {sec!r}; known: {list(SECTIONS)}")
        try:
            parsed = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            parsed = value.strip()
        out.setdefault(sec, {})[name.strip()] = parsed
    return out


def _runs(a) -> tuple[object, list]:
    """The profile (with overrides) and the selected runs (:func:`nmt_lib.profile.load_runs`)."""
    profile = load_runs(a.profile, a.data_dir or None, a.run, **parse_sets(a.set or []))
    return profile, list(profile.runs.values())


def _out(a, profile) -> Path:
    return Path(a.out) if a.out else home() / "results" / profile.name


def cmd_train(a) -> int:
    profile, runs = _runs(a)
    for cfg in runs:
        out = _out(a, profile) / "runs" / run_dir_name(cfg.name)
        s = train_run(
            cfg, out, resume=not a.no_resume, checkpoint_dir=a.checkpoint_dir, progress=a.progress
        )
        ev = s.get("last_eval") or {}
        print(
            f"[train] {cfg.name}: {s['updates']} updates, {s['epochs']:.2f} epochs, "
            f"{s['hours'] * 60:.1f} min, stopped by {s['stopped_by']}; dev NLL "
            f"{ev.get('dev_nll')}, dev BLEU {ev.get('dev_bleu')} -> {out}",
            file=sys.stderr,
        )
    return 0


def cmd_evaluate(a) -> int:
    profile, runs = _runs(a)
    prepared = {}
    for cfg in runs:
        out = _out(a, profile) / "runs" / run_dir_name(cfg.name)
        key = repr(cfg.data)
        if key not in prepared:
            prepared[key] = data.prepare(cfg.data)
        r = evaluate_run(cfg, out, prepared[key], checkpoint=a.checkpoint, progress=a.progress)
        print(
            f"[evaluate] {cfg.name}: BLEU All {r['all']['tok']['score']:.2f} (tokenized), "
            f"{r['all']['detok']['score']:.2f} (detokenized); No-UNK "
            f"{r['no_unk'].get('tok', {}).get('score', float('nan')):.2f} on {r['no_unk']['n']} "
            f"sentences -> {out}",
            file=sys.stderr,
        )
    return 0


def cmd_pack(a) -> int:
    profile, runs = _runs(a)
    done: dict[str, str] = {}
    for cfg in runs:
        key = repr(cfg.data)
        if key not in done:
            name = run_dir_name(cfg.name) if len(runs) > 1 else ""
            done[key] = str(data.pack(cfg.data, Path(a.pack_dir) / name))
        print(
            f"[pack] {cfg.name}: {done[key]} (train there with --set data.packed={done[key]})",
            file=sys.stderr,
        )
    return 0


#: Lines that ``translate`` reads, translates and writes at a time (one from a terminal): its memory
#: does not grow with the input's length, and the translations of a long input appear as it goes.
CHUNK_LINES = 1024

#: ``translate``'s default ``--max-words``: far beyond any sentence (training keeps those of at most
#: ``data.max_len`` words, 50 in the paper), far below a whole document on one line.
MAX_WORDS = 1000


def cmd_translate(a) -> int:
    profile, runs = _runs(a)
    if len(runs) != 1:
        raise ConfigError(f"translate needs one --run; the profile has {list(profile.runs)}")
    cfg = runs[0]
    if a.output and a.output != "-" and Path(a.output).is_dir():
        raise IsADirectoryError(f"{a.output}: is a directory: -o takes the name of a file to write")
    loaded = _translator(a, profile, cfg)
    loaded.on.tune_process()
    search = cfg.search
    if a.beam is not None or a.normalize:
        beam = search.beam if a.beam is None else a.beam
        search = replace(search, beam=beam, normalize=a.normalize or search.normalize)
    output = Output(a.ignore_unk, a.alignment, a.replace_unk)
    name = "standard input" if a.input in (None, "-") else a.input
    bad = 0
    with (
        nullcontext(sys.stdin.buffer) if a.input in (None, "-") else open(a.input, "rb") as src,
        _output(a.output) as sink,
    ):
        for chunk in _chunks(_read_lines(src, name), 1 if src.isatty() else CHUNK_LINES):
            lines = []
            for k, line, msg in chunk:
                if not msg and (n := len(line.split())) > a.max_words:
                    line, msg = "", f"{name}, line {k}: {n:,} words, over --max-words {a.max_words}"
                bad += _warn(loaded.cfg, name, k, line, msg)
                lines.append(line)
            out = translate.translate_lines(loaded, lines, search, output, cfg.train.precision)
            sink.write("".join(line + "\n" for line in out))
            sink.flush()
    return 1 if bad else 0


def _translator(a, profile, cfg):
    """The model that ``translate`` translates with (:func:`nmt_lib.loading.load_for_run`): the
    ``--checkpoint``, else the run's own checkpoint, else its published weights."""
    device = resolve_device(cfg.train.device)
    return load_for_run(cfg, _out(a, profile), a.checkpoint, device, a.profile)


def _warn(saved, name: str, k: int, line: str, msg: str | None) -> int:
    """Say on standard error what is wrong with line ``k`` of the input ``name``: not text
    (``msg``; it is translated as an empty line, so that the output stays line by line: 1) or far
    longer than the training sentences of the run ``saved`` (0)."""
    if msg:
        print(f"nmt_lib translate: {msg}: translated as an empty line", file=sys.stderr)
        return 1
    if (n := len(line.split())) > 2 * saved.data.max_len:
        print(
            f"nmt_lib translate: {name}, line {k}: {n} words, far beyond the "
            f"{saved.data.max_len} words of the longest training sentences (data.max_len); "
            "expect a poor translation",
            file=sys.stderr,
        )
    return 0


def _output(path: str | None):
    """Where ``translate`` writes: standard output, or the file ``path`` (written atomically: it
    appears, whole, once every line is translated)."""
    return nullcontext(sys.stdout) if path in (None, "-") else atomic_write(path)


def _chunks(items, n: int):
    """``items`` (an iterable) in lists of ``n`` (the last one shorter)."""
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _read_lines(stream, name: str):
    """``(number, text, message)`` for each line of the binary ``stream`` (``name``: what messages
    call it), read as it goes: the text decoded from UTF-8 (its ``\\n`` and trailing ``\\r``
    dropped), or, for a line that is not UTF-8, an empty text and a message naming the line. A
    final line without a newline is a line."""
    for k, raw in enumerate(stream, 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        try:
            yield k, line.decode("utf-8").rstrip("\r"), None
        except UnicodeDecodeError as e:
            yield (
                k,
                "",
                (f"{name}, line {k}: not UTF-8 (byte {line[e.start]:#x} at column {e.start + 1})"),
            )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _common(p, many: bool = True):
    """The options of every command: the profile, its runs, overrides, data and results."""
    p.add_argument("--profile", default="smoke", help="profile name or TOML path (default smoke)")
    p.add_argument(
        "--run",
        "--run-name",
        action="append",
        metavar="NAME",
        help="a run of the profile, e.g. 'RNNsearch-50'"
        + ("; repeatable; default: all" if many else "")
        + " (under torchrun: --run-name)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.KEY=VALUE",
        help="override a setting for every run, e.g. train.max_updates=100",
    )
    p.add_argument(
        "--data-dir",
        help="the data directory: the WMT'14 layout, or Multi30k's (sets data.data_dir; beats NMT_DATA)",
    )
    p.add_argument("--out", help="results directory of the profile (default results/<profile>)")


def _translate_parser(sub) -> None:
    """``translate``'s options."""
    p = sub.add_parser("translate", help="translate raw English lines with beam search")
    _common(p, many=False)
    p.add_argument("--checkpoint", help="checkpoint file or directory (default: the run's)")
    p.add_argument("--input", "-i", help="input file (default: stdin)")
    p.add_argument("--output", "-o", help="output file (default: stdout)")
    p.add_argument("--beam", type=_positive, help="beam size (default: the profile's search.beam)")
    p.add_argument("--normalize", action="store_true", help="length-normalized final choice")
    p.add_argument(
        "--max-words",
        type=_positive,
        default=MAX_WORDS,
        help=f"a longer line is translated as an empty line, and named (default {MAX_WORDS})",
    )
    p.add_argument("--ignore-unk", action="store_true", help="never emit <unk>")
    p.add_argument(
        "--alignment",
        action="store_true",
        help="under each translation, the source word each word attends to most",
    )
    p.add_argument(
        "--replace-unk",
        action="store_true",
        help="replace each <unk> by the source word it attends to most (beyond the "
        "paper; models with attention)",
    )
    p.set_defaults(func=cmd_translate)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_lib",
        description="Train, translate with and evaluate RNNsearch / RNNencdec (Bahdanau et al.).",
        epilog=__doc__.split("Examples::")[1].split("Results of")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train the profile's models (resumes from checkpoints)")
    _common(p)
    p.add_argument("--checkpoint-dir", help="checkpoints (default <cache>/ckpt/<run>-<hash>)")
    p.add_argument("--no-resume", action="store_true", help="start afresh, ignore checkpoints")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: only on a terminal)",
    )
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="decode the test set, BLEU, NLL, attention files")
    _common(p)
    p.add_argument("--checkpoint", help="checkpoint file or directory (default: the run's)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("pack", help="the prepared data and dev/test files, for another machine")
    _common(p)
    p.add_argument(
        "pack_dir",
        help="a new directory to write (a folder per run when several); "
        "an existing one must be empty or a pack, which is replaced",
    )
    p.set_defaults(func=cmd_pack)

    _translate_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        return a.func(a)
    except KeyboardInterrupt:
        print(f"nmt_lib {a.command}: interrupted", file=sys.stderr)
        return 130
    except ConfigError as e:
        print(f"nmt_lib: configuration error: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, RuntimeError) as e:
        if getattr(e, "signum", None):  # nmt_lib.train.Interrupted: the checkpoint is saved
            print(f"nmt_lib {a.command}: interrupted by {e}", file=sys.stderr)
            return 128 + e.signum
        print(f"nmt_lib {a.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
