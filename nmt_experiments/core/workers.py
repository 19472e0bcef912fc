"""Several runs of a study at a time, each in a process of its own that ends with the study.

:func:`run_all` calls ``fn(item)`` for every item, ``jobs`` at a time, each in a fresh process
(``spawn``), and returns the results in order. What stops it:

* a SIGTERM or SIGINT to the study (``kill PID``, Ctrl-C, a scheduler's stop) is passed to every
  running run as SIGTERM: a training stops at its next update with its checkpoint saved
  (:func:`nmt_lib.train.train_run`), an evaluation is abandoned whole (it commits in one step), no
  further run starts, and :class:`Stopped` is raised once every run has ended;
* a study killed outright (SIGKILL) takes its runs with it: each asks Linux for a SIGTERM when its
  parent dies (``prctl(PR_SET_PDEATHSIG)``; elsewhere a thread watches the parent's pid);
* a run killed on its own (the out-of-memory killer) stops the others the same way, and one that
  fails starts no further run; :class:`Stopped` names each run that did not finish and why.

Rerunning the study resumes every run to exactly the uninterrupted result.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing import get_context
from multiprocessing.connection import wait

from nmt_lib.io import Busy
from nmt_lib.train import Interrupted

PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Stopped(RuntimeError):
    """Runs of a study that did not finish, one line each (``lines``); ``signum``: the signal
    that stopped the study, 0 where a run failed or was killed on its own."""

    def __init__(self, lines: list[str], signum: int = 0):
        self.lines, self.signum = lines, signum
        super().__init__("\n".join(lines))


def run_all(fn, items, jobs: int, on_result=None) -> list:
    """``[fn(item) for item in items]``, ``jobs`` at a time, each call in a process of its own;
    ``on_result(item, result)`` as each one ends. Raises :class:`Stopped` (see the module)."""
    items, ctx = list(items), get_context("spawn")
    results, lines, stop = {}, [], []
    todo, running = list(range(len(items))), {}
    with _forwarded(running, stop):
        while todo or running:
            while todo and len(running) < jobs and not stop and not lines:
                i = todo.pop(0)
                recv, send = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_child, args=(fn, items[i], send, os.getpid()))
                p.start()
                send.close()
                running[recv] = (i, p)
                if stop:  # the signal came while it started
                    _terminate(running)
            if not running:
                break
            for recv in wait(list(running)):
                i, p = running.pop(recv)
                try:
                    ok, value = recv.recv()
                except EOFError:  # it died without a word
                    ok, value = False, None
                recv.close()
                p.join()
                if ok:
                    results[i] = value
                    if on_result is not None:
                        on_result(items[i], value)
                    continue
                if value is None:
                    code = p.exitcode
                    value = f"killed by {_name(-code)}" if code < 0 else f"ended with status {code}"
                    if not stop:  # stop the others, each with its checkpoint
                        _terminate(running)
                lines.append(f"{items[i]}: {value}")
    if stop or lines:
        raise Stopped(lines + [f"{items[i]}: not started" for i in todo], stop[0] if stop else 0)
    return [results[i] for i in range(len(items))]


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _terminate(running: dict) -> None:
    """SIGTERM to every running run."""
    for _, p in list(running.values()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)


@contextlib.contextmanager
def _forwarded(running: dict, stop: list):
    """SIGINT and SIGTERM to this process, recorded in ``stop`` and passed to the runs as
    SIGTERM while the block runs (Python's handlers run in the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum, frame):
        stop.append(signum)
        _terminate(running)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _child(fn, item, send, parent: int) -> None:
    """A run's process: ``fn(item)``, its result or what stopped it sent back."""
    _die_with(parent)
    try:
        out = (True, fn(item))
    except BaseException as e:  # noqa: BLE001 - every end is reported, in one line
        if not isinstance(e, (OSError, ValueError, RuntimeError, KeyboardInterrupt)):
            traceback.print_exc()  # a bug: its traceback
        out = (False, str(e) if isinstance(e, (Interrupted, Busy)) else f"{type(e).__name__}: {e}")
    with contextlib.suppress(OSError):  # the study gone: nobody to tell
        send.send(out)


def _die_with(parent: int) -> None:
    """A SIGTERM to this process when ``parent`` ends (Linux: PR_SET_PDEATHSIG; elsewhere a
    thread that looks every second)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if sys.platform != "linux" or libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError
    except (OSError, AttributeError):
        threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it ended before we asked
        os.kill(os.getpid(), signal.SIGTERM)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1)
    os.kill(os.getpid(), signal.SIGTERM)


def reported(prog: str, main, argv) -> int:
    """``main(argv)``, with a study stopped (:class:`Stopped`), an interrupted training or a run
    in use (:class:`~nmt_lib.io.Busy`) told in one line each on stderr: exit ``128 + signal``
    after a signal, else 1."""
    try:
        return main(argv)
    except (Stopped, Interrupted, Busy) as e:
        for line in str(e).splitlines():
            print(f"[{prog}] {line}", file=sys.stderr)
        signum = getattr(e, "signum", 0)
        if signum and isinstance(e, Stopped):
            print(
                f"[{prog}] stopped by {_name(signum)}: rerun the same command to resume",
                file=sys.stderr,
            )
        return 128 + signum if signum else 1
