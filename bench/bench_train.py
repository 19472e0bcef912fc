"""Training throughput of nmt_lib against a straightforward PyTorch RNNsearch, in the same process.

    python bench/bench_train.py                                   # bench-small, both archs, fp32+bf16
    python bench/bench_train.py --shape paper --steps 2 --reps 1  # App. A.2.3 sizes (slow on 2 cores)
    python bench/bench_train.py --memory                          # peak RSS, one fresh process each
    python bench/bench_train.py --sweep                           # time per target token vs length
    python bench/bench_train.py --products --arch RNNsearch       # the step's products vs the peak

A training step is ``nmt_lib.train.Trainer.step``'s: forward, summed NLL, backward, clip, Adadelta.
Throughput = real target tokens (EOS included, padding excluded) / wall time. ``nmt_lib`` and
``bench/naive.py`` (same parameters, same batches; checked to compute the same log-probabilities) run
alternately, batch by batch; the speed-up is the median over batches of naive time / nmt_lib time.
The FLOP efficiency is the model FLOPs of the real tokens (``nmt_lib.paper.model.forward_macs``, training = 3 ×
forward) per second over the machine's GEMM peak (a 2048^3 ``torch.matmul`` in the step's precision)
measured right after each step, so that both see the same load on a shared machine.
``--products`` profiles nmt_lib's step (``torch.profiler``): each product's FLOPs over its time, against
the mean of the GEMM peaks measured before and after, and the products' share of the step, hence how
much faster the step could be if nothing but its products took time (CPU only; with AMX, nmt_lib's own
AMX products are not PyTorch operators: the profiler does not see them, and counts them as the rest).
Not a test: nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import copy
import json
import math

import torch
from common import (
    SHAPES,
    Trainee,
    batch_train_flops,
    child_peak_rss,
    default_precisions,
    gemm_peak,
    machine_info,
    median,
    model_config,
    pair,
    peak_rss_mb,
    setup_threads,
    synthetic_batches,
    timed,
)

from nmt_lib.fast import accelerate, kernels
from nmt_lib.paper.model import build_model


def on(device, batches):
    return [tuple(t.to(device) for t in b) for b in batches]


def throughput(
    shape, arch, precision, steps, reps, with_naive=True, device="cpu", cuda_graphs=False
) -> dict:
    cfg = model_config(shape, arch)
    sh = SHAPES[shape]
    ours, naive = pair(cfg, precision, device)
    batches = synthetic_batches(cfg, sh["batch"], sh["lengths"], steps, seed=1)
    runners = [ours, naive] if with_naive else [ours]
    if cuda_graphs:  # nmt_lib again, its forward and backward replayed as CUDA graphs
        model = copy.deepcopy(ours.model)
        runners.append(Trainee("graphs", cfg, model, False, precision, cuda_graphs=True))
    # warm-up: first-call allocations, the oneDNN kernels of every batch's shapes (built once per
    for b in on(device, batches):  # shape; a long run has built them all)
        for r in runners:
            r.step(b)
    wall = {r.name: [] for r in runners}
    cpu = {r.name: [] for r in runners}
    tokens, flops, peak, mem = [], [], [], {r.name: 0 for r in runners}
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    gpu = torch.device(device).type == "cuda"
    for rep in range(reps):
        for k, (b, b_dev) in enumerate(zip(batches, on(device, batches), strict=True)):
            order = runners if (k + rep) % 2 == 0 else runners[::-1]  # cancel drift
            for r in order:
                if gpu:
                    torch.cuda.reset_peak_memory_stats()
                _, w, c = timed(r.step, b_dev)
                wall[r.name].append(w)
                cpu[r.name].append(c)
                if gpu:
                    mem[r.name] = max(mem[r.name], torch.cuda.max_memory_allocated() / 2**20)
            tokens.append(int(b[3].sum()))
            flops.append(batch_train_flops(cfg, b))
            peak.append(gemm_peak(dtype, reps=2, device=device))  # the GEMM peak right now
    out = {
        "shape": shape,
        "arch": arch,
        "precision": precision,
        "device": str(device),
        "steps": len(tokens),
        "tokens_per_step": sum(tokens) / len(tokens),
    }
    out["gemm_peak_median"], out["gemm_peak_max"] = median(peak), max(peak)
    for name in wall:
        out[f"{name}_tok_s"] = sum(tokens) / sum(wall[name])
        out[f"{name}_tok_s_median"] = median(
            [t / w for t, w in zip(tokens, wall[name], strict=True)]
        )
        out[f"{name}_tok_s_cpu"] = sum(tokens) / sum(cpu[name])  # per CPU-second of the process
        out[f"{name}_s_per_step"] = median(wall[name])
        if gpu:
            out[f"{name}_gpu_peak_mb"] = mem[name]  # torch.cuda.max_memory_allocated
        # model FLOP/s of each step over the GEMM peak measured right after it; and over the best peak
        out[f"{name}_flop_frac"] = median(
            [f / w / p for f, w, p in zip(flops, wall[name], peak, strict=True)]
        )
        out[f"{name}_flop_frac_of_max_peak"] = sum(flops) / sum(wall[name]) / max(peak)
    if cuda_graphs:
        out["graphs_speedup"] = median(
            [o / g for o, g in zip(wall["nmt_lib"], wall["graphs"], strict=True)]
        )
    if with_naive:
        out["speedup"] = median(
            [n / o for n, o in zip(wall["naive"], wall["nmt_lib"], strict=True)]
        )
        out["speedup_cpu"] = median(
            [n / o for n, o in zip(cpu["naive"], cpu["nmt_lib"], strict=True)]
        )
    out["model_gflop_per_trg_token"] = sum(flops) / sum(tokens) / 1e9
    return out


def memory_child(impl, shape, arch, precision):
    """Runs in a fresh process: peak RSS of building the model and two training steps."""
    cfg = model_config(shape, arch)
    sh = SHAPES[shape]
    model = build_model(cfg) if impl == "naive" else accelerate(build_model(cfg))
    r = Trainee(impl, cfg, model, impl == "naive", precision)
    batches = synthetic_batches(cfg, sh["batch"], sh["lengths"], 2, seed=1)
    base = peak_rss_mb()
    for b in batches:
        r.step(b)
    print("RSS " + json.dumps({"impl": impl, "built_mb": base, "peak_mb": peak_rss_mb()}))


def sweep(shape, precision, lengths, steps, with_naive, device="cpu") -> list[dict]:
    """Seconds per target token when every sentence (both sides) has ``L`` words."""
    cfg = model_config(shape, "RNNsearch")
    ours, naive = pair(cfg, precision, device)
    rows = []
    for L in lengths:
        batches = on(device, synthetic_batches(cfg, SHAPES[shape]["batch"], (L, L), steps, seed=L))
        row = {"L": L}
        for r in [ours, naive] if with_naive else [ours]:
            r.step(batches[0])
            t = sum(timed(r.step, b)[1] for b in batches)
            row[f"{r.name}_ms_per_tok"] = 1e3 * t / sum(int(b[3].sum()) for b in batches)
        rows.append(row)
    return rows


#: PyTorch's matrix products as the profiler names them, and their FLOPs from the input shapes
PRODUCTS = {
    "mkldnn::_linear_pointwise": lambda x, w, *_: 2 * math.prod(x) * w[0],
    "aten::mm": lambda a, b, *_: 2 * a[0] * a[1] * b[1],
    "aten::addmm": lambda _, a, b, *__: 2 * a[0] * a[1] * b[1],
    "aten::bmm": lambda a, b, *_: 2 * math.prod(a) * b[2],
    "aten::baddbmm": lambda _, a, b, *__: 2 * math.prod(a) * b[2],
}


def products(shape, arch, precision, steps, top=12) -> dict:
    """nmt_lib's training step on the CPU under ``torch.profiler``: its products' time and
    efficiency."""
    from torch.profiler import ProfilerActivity, profile

    cfg = model_config(shape, arch)
    ours, _ = pair(cfg, precision)
    batches = synthetic_batches(
        cfg, SHAPES[shape]["batch"], SHAPES[shape]["lengths"], steps, seed=1
    )
    for b in batches:  # warm-up, as in throughput()
        ours.step(b)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    if dtype == torch.bfloat16 and kernels.amx():
        print(
            "note: nmt_lib's AMX products are not PyTorch operators: counted outside the products"
        )
    peaks = [gemm_peak(dtype)]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for b in batches:
            ours.step(b)
    peaks.append(gemm_peak(dtype))
    peak = sum(peaks) / len(peaks)
    total = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e6
    rows = []
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key in PRODUCTS and e.self_cpu_time_total > 0:
            secs, flop = e.self_cpu_time_total / 1e6, PRODUCTS[e.key](*e.input_shapes) * e.count
            shapes = [list(s) for s in e.input_shapes if s]
            rows.append(
                {
                    "op": e.key,
                    "shapes": shapes,
                    "calls_per_step": e.count / steps,
                    "ms_per_step": 1e3 * secs / steps,
                    "flop": flop,
                    "secs": secs,
                }
            )
    rows.sort(key=lambda r: -r["secs"])
    secs, flop = sum(r["secs"] for r in rows), sum(r["flop"] for r in rows)
    print(
        f"\n{arch} {shape} {precision}: the profiled step {1e3 * total / steps:.1f} ms, its "
        f"products {1e3 * secs / steps:.1f} ms ({100 * secs / total:.0f} %) at "
        f"{100 * flop / secs / peak:.0f} % of the GEMM peak ({peak / 1e9:.1f} GFLOP/s, the mean "
        f"of {peaks[0] / 1e9:.1f} before and {peaks[1] / 1e9:.1f} after). With no time outside "
        f"its products the step would be {total / secs:.2f}x as fast."
    )
    print(
        "| product | input shapes | calls per step | ms per step | % of the peak |\n|---|---|---|---|---|"
    )
    for r in rows[:top]:
        print(
            f"| {r['op']} | {r['shapes']} | {r['calls_per_step']:.1f} | {r['ms_per_step']:.1f} | "
            f"{100 * r['flop'] / r['secs'] / peak:.0f} |"
        )
    return {
        "arch": arch,
        "precision": precision,
        "step_s": total / steps,
        "products_s": secs / steps,
        "products_flop_frac": flop / secs / peak,
        "peaks": peaks,
        "ceiling": total / secs,
        "rows": rows,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    ap.add_argument("--arch", nargs="+", default=["RNNsearch", "RNNencdec"])
    ap.add_argument("--precision", nargs="+", help="default: fp32, and bf16 where it is native")
    ap.add_argument("--steps", type=int, default=6, help="distinct batches")
    ap.add_argument("--reps", type=int, default=2, help="passes over the batches")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (--memory: cpu only)")
    ap.add_argument(
        "--cuda-graphs", action="store_true", help="also time nmt_lib with train.cuda_graphs (GPU)"
    )
    ap.add_argument("--no-naive", action="store_true", help="time nmt_lib only")
    ap.add_argument("--memory", action="store_true", help="peak RSS of each implementation")
    ap.add_argument("--sweep", action="store_true", help="time per target token vs length")
    ap.add_argument("--sweep-lengths", type=int, nargs="+", default=[10, 20, 40, 80])
    ap.add_argument(
        "--products",
        action="store_true",
        help="nmt_lib's products: their share of a step and %% of the GEMM peak",
    )
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument(
        "--child", nargs=4, metavar=("IMPL", "SHAPE", "ARCH", "PRECISION"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.cuda_graphs and args.device != "cuda":
        ap.error("--cuda-graphs needs --device cuda")
    if args.products and args.device != "cpu":
        ap.error("--products: CPU only")
    setup_threads(args.threads)
    if args.child:
        return memory_child(*args.child)

    args.precision = args.precision or default_precisions(args.device)
    info = machine_info()
    print("machine:", json.dumps(info))
    results = {"machine": info, "settings": {k: v for k, v in vars(args).items() if k != "json"}}
    if args.memory:
        rows = []
        for arch in args.arch:
            for prec in args.precision:
                for impl in ("nmt_lib", "naive"):
                    child = [
                        __file__,
                        "--threads",
                        str(args.threads),
                        "--child",
                        impl,
                        args.shape,
                        arch,
                        prec,
                    ]
                    rows.append({"arch": arch, "precision": prec, **child_peak_rss(child)})
                    print(json.dumps(rows[-1]))
        results["memory"] = rows
        print(
            "\n| arch | precision | impl | RSS after build MB | peak RSS MB |\n|---|---|---|---|---|"
        )
        for r in rows:
            print(
                f"| {r['arch']} | {r['precision']} | {r['impl']} | {r['built_mb']:.0f} | "
                f"{r['peak_mb']:.0f} |"
            )
    elif args.products:
        results["products"] = [
            products(args.shape, arch, prec, args.steps)
            for arch in args.arch
            for prec in args.precision
        ]
    elif args.sweep:
        for prec in args.precision:
            rows = sweep(
                args.shape, prec, args.sweep_lengths, args.steps, not args.no_naive, args.device
            )
            results[f"sweep_{prec}"] = rows
            print(
                f"\n{prec}: ms per target token, RNNsearch {args.shape}, batch "
                f"{SHAPES[args.shape]['batch']}, every sentence L words (+EOS) on both sides"
            )
            print("| L | nmt_lib | naive | naive / nmt_lib |\n|---|---|---|---|")
            for r in rows:
                nv = r.get("naive_ms_per_tok", float("nan"))
                print(
                    f"| {r['L']} | {r['nmt_lib_ms_per_tok']:.3f} | {nv:.3f} | "
                    f"{nv / r['nmt_lib_ms_per_tok']:.2f} |"
                )
    else:
        rows = []
        for arch in args.arch:
            for prec in args.precision:
                rows.append(
                    throughput(
                        args.shape,
                        arch,
                        prec,
                        args.steps,
                        args.reps,
                        not args.no_naive,
                        args.device,
                        args.cuda_graphs,
                    )
                )
                print(json.dumps(rows[-1]))
        results["throughput"] = rows
        nan = float("nan")
        where = f"{args.threads} thread(s)" if args.device == "cpu" else info["gpu"]
        print(
            f"\nshape {args.shape}, {where}. tok/s: real target tokens (EOS "
            "incl.) per wall second, total and median over steps; speed-up: median over batches "
            "of naive / nmt_lib step time; % peak: model FLOP/s of a step over the GEMM peak "
            "measured right after it (median), and over the best peak of the run"
        )
        print(
            "| arch | precision | nmt_lib tok/s (median) | naive tok/s (median) | speed-up | "
            "nmt_lib % peak (of best) | naive % peak (of best) | GEMM peak GFLOP/s median / best "
            "| model GFLOP / target token |\n|---|---|---|---|---|---|---|---|---|"
        )
        for r in rows:
            print(
                f"| {r['arch']} | {r['precision']} | {r['nmt_lib_tok_s']:.0f} "
                f"({r['nmt_lib_tok_s_median']:.0f}) | {r.get('naive_tok_s', nan):.0f} "
                f"({r.get('naive_tok_s_median', nan):.0f}) | {r.get('speedup', nan):.2f} | "
                f"{100 * r['nmt_lib_flop_frac']:.1f} ({100 * r['nmt_lib_flop_frac_of_max_peak']:.1f}) | "
                f"{100 * r.get('naive_flop_frac', nan):.1f} "
                f"({100 * r.get('naive_flop_frac_of_max_peak', nan):.1f}) | "
                f"{r['gemm_peak_median'] / 1e9:.0f} / {r['gemm_peak_max'] / 1e9:.0f} | "
                f"{r['model_gflop_per_trg_token']:.3f} |"
            )
        for r in rows if args.cuda_graphs else []:
            print(
                f"{r['arch']} {r['precision']} with CUDA graphs: {r['graphs_tok_s']:.0f} tok/s "
                f"({r['graphs_tok_s_median']:.0f}), {100 * r['graphs_flop_frac']:.1f} % of the "
                f"peak, {r['graphs_speedup']:.2f}x nmt_lib's eager step"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
