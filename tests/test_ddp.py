"""Several processes (torchrun / DDP), tested on CPU with gloo and two processes (nmt_lib.train).

Each rank takes every other batch of the shared stream; gradients are summed over ranks, so an
update equals the single-process update on the two minibatches together.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from nmt_lib import data
from nmt_lib.config import load_profile
from nmt_lib.data import fixtures, pad
from nmt_lib.paper.model import build_model
from nmt_lib.train import train_run
from nmt_lib.trainer import Trainer

UPDATES = 3


def toy_config(root: Path):
    prof = load_profile(
        "smoke",
        data={"data_dir": str(root / "wmt"), "cache_dir": str(root / "cache")},
        train={
            "threads": 1,
            "precision": "fp32",
            "device": "cpu",
            "max_updates": 4,
            "eval_every": 2,
            "dev_bleu_sentences": 2,
        },
    )
    return prof.runs["RNNsearch-50"]


def new_trainer(cfg, prep, rank=0, world=1):
    torch.manual_seed(cfg.train.seed)
    it = data.TrainIterator.from_config(prep.train, cfg.data)
    return Trainer(cfg, build_model(cfg.model), it, "cpu", rank, world)


def worker(rank: int, world: int, port: int, root: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
    )
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        root = Path(root)
        cfg = toy_config(root)
        prep = data.prepare(cfg.data, workers=1, progress=False)
        tr = new_trainer(cfg, prep, rank, world)
        losses = [tr.step()["loss"] for _ in range(UPDATES)]
        state = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
        torch.save({"params": state, "losses": losses}, root / f"rank{rank}.pt")
        # the whole train_run under DDP: evaluation on rank 0, decisions broadcast
        train_run(cfg, root / "out", prep, progress=False)
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available")
def test_two_processes_agree_and_sum_gradients(tmp_path):
    fixtures.write_toy_wmt(tmp_path / "wmt", n_train=400, n_dev=20, n_test=20)
    cfg = toy_config(tmp_path)
    prep = data.prepare(cfg.data, workers=1, progress=False)  # once, before the workers read it
    torch.optim.Adadelta([torch.zeros(1, requires_grad=True)])  # imports torch._dynamo once, here
    # fork: the workers inherit the imports (a fresh interpreter per worker takes ~10 s here)
    mp.start_processes(
        worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True, start_method="fork"
    )
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    for name in r0["params"]:
        assert torch.equal(r0["params"][name], r1["params"][name]), name
    assert r0["losses"] != r1["losses"]  # the ranks saw different batches

    # one process, each update on the two minibatches together, gives the same parameters
    ref = new_trainer(cfg, prep)
    it = data.TrainIterator.from_config(prep.train, cfg.data)

    def merged():
        while True:
            a, b = next(it), next(it)
            xs = [r[m].tolist() for t in (a, b) for r, m in zip(t.x, t.x_mask, strict=True)]
            ys = [r[m].tolist() for t in (a, b) for r, m in zip(t.y, t.y_mask, strict=True)]
            yield data.Batch(*pad(xs), *pad(ys))

    ref.iterator = merged()
    for _ in range(UPDATES):
        ref.step()
    for name, p in ref.model.named_parameters():
        torch.testing.assert_close(p.detach(), r0["params"][name], rtol=1e-4, atol=1e-6)

    summary = json.loads((tmp_path / "out" / "train_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["updates"] == 4
    log = [json.loads(x) for x in (tmp_path / "out" / "train_log.jsonl").read_text().splitlines()]
    assert [r["update"] for r in log if r["kind"] == "eval"] == [2, 4]  # written once, by rank 0
