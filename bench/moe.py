#!/usr/bin/env python3
"""Mixture-of-experts GEMMs in PyTorch: mmtune.grouped_matmul (one launch, routing on the
device) against torch._grouped_mm (where the installed torch has it) and a loop of torch.matmul
over the experts, side by side in one run, on the same inputs, outputs compared.

Layers: Mixtral's (8 experts, 14336 x 4096 and 4096 x 14336) and fine-grained ones (64 to 160
experts), bf16, weights as nn.Linear keeps them (G x N x K); routed rows (tokens times top-k)
from 16 to 16384, uniform and Zipf-skewed routings (tuner/gpu/routing.c's kinds).  Times are
CUDA events over --runs back-to-back calls after a warm-up, the median of --reps.

--gated: the experts' SwiGLU up projections instead (Mixtral's and the fine-grained layers'
first GEMM, D = silu(x W_gate^T) * (x W_up^T)): mmtune's one gated grouped kernel against
torch._grouped_mm of the 2N columns and the loop, each followed by PyTorch's silu and product.

    PYTHONPATH=python MMTUNE_LIBRARY=build/runtime/libmmtune.so python3 bench/moe.py
"""

import argparse
import statistics
import sys

import torch

import mmtune

LAYERS = [("8x14336x4096", 8, 14336, 4096), ("8x4096x14336", 8, 4096, 14336),
          ("64x1408x2048", 64, 1408, 2048), ("128x768x2048", 128, 768, 2048),
          ("160x1536x5120", 160, 1536, 5120)]


def route(g, rows, zipf, gen):
    """The rows of each of g experts: each row's expert drawn uniformly or with weight
    1 / (z + 1)^1.2."""
    w = torch.arange(1, g + 1, dtype=torch.float64) ** -1.2 if zipf else torch.ones(g, dtype=torch.float64)
    picks = torch.multinomial(w, rows, replacement=True, generator=gen)
    return torch.bincount(picks, minlength=g).tolist()


def timed(fn, runs, reps):
    """Median ms a call over reps batches of runs calls (events around each batch)."""
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(runs):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / runs)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="16,256,2048,16384", help="routed rows, comma-separated")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--gated", action="store_true",
                    help="the up projections, SwiGLU-gated (weights G x 2N x K)")
    a = ap.parse_args()
    grouped_mm = getattr(torch, "_grouped_mm", None)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; bf16, "
          f"{'torch._grouped_mm' if grouped_mm else 'no torch._grouped_mm'}")
    print(f"{'layer':14s} {'rows':>6s} {'routing':7s} {'mmtune ms':>10s} {'_grouped_mm':>11s} "
          f"{'loop ms':>9s} {'vs _grouped_mm':>14s} {'vs loop':>8s}  max |diff| / max |ref|")
    gen = torch.Generator().manual_seed(0)
    ratios_gm, ratios_loop = [], []
    layers = [la for la in LAYERS if la[0] != "8x4096x14336"] if a.gated else LAYERS
    if a.gated:
        print("gated: D = silu(gate) * up, each expert's weight 2N x K (gate and up rows "
              "interleaved); the peers run PyTorch's silu and product after their GEMMs")

    def gate(y):
        return torch.nn.functional.silu(y[:, 0::2]) * y[:, 1::2] if a.gated else y
    for name, g, n, k in layers:
        np_ = 2 * n if a.gated else n  # the product's columns
        w = torch.randn(g, np_, k, device="cuda", dtype=torch.bfloat16) * k ** -0.5
        for rows in (int(r) for r in a.rows.split(",")):
            x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
            for zipf in (False, True):
                counts = route(g, rows, zipf, gen)
                ends = torch.tensor(counts, dtype=torch.int64).cumsum(0)
                offsets = torch.cat((torch.zeros(1, dtype=torch.int64), ends)).to(
                    device="cuda", dtype=torch.int32)
                offs = ends.to(device="cuda", dtype=torch.int32)
                bounds = [0] + ends.tolist()
                out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
                prod = torch.empty(rows, np_, device="cuda", dtype=torch.bfloat16)
                res = {}

                def mm():
                    mmtune.grouped_matmul(x, w, offsets, tokens=rows, out=out, trans_b=True,
                                          gated=a.gated, act="silu" if a.gated else None)

                def loop():
                    for z in range(g):
                        if bounds[z + 1] > bounds[z]:
                            torch.matmul(x[bounds[z]:bounds[z + 1]], w[z].T,
                                         out=prod[bounds[z]:bounds[z + 1]])
                    res["ref"] = gate(prod)

                t_mm, t_loop = timed(mm, a.runs, a.reps), timed(loop, a.runs, a.reps)
                ref = res["ref"]
                diff = (out.float() - ref.float()).abs().max().item() / (
                    ref.float().abs().max().item() or 1.0)
                t_gm = None
                if grouped_mm is not None:
                    try:
                        t_gm = timed(lambda: gate(grouped_mm(x, w.transpose(1, 2), offs=offs)),
                                     a.runs, a.reps)
                    except RuntimeError as e:  # a shape or layout it refuses
                        print(f"  torch._grouped_mm: {str(e).splitlines()[0]}")
                        grouped_mm = None
                if t_gm:
                    ratios_gm.append(t_gm / t_mm)
                ratios_loop.append(t_loop / t_mm)
                print(f"{name:14s} {rows:6d} {'zipf' if zipf else 'uniform':7s} {t_mm:10.4f} "
                      f"{(f'{t_gm:.4f}' if t_gm else '-'):>11s} {t_loop:9.4f} "
                      f"{(f'{t_gm / t_mm:.3f}x' if t_gm else '-'):>14s} {t_loop / t_mm:7.3f}x  "
                      f"{diff:.2e}", flush=True)

    def geo(v):
        return statistics.geometric_mean(v) if v else float("nan")
    print(f"geomean: {geo(ratios_gm):.3f}x torch._grouped_mm ({len(ratios_gm)} cases, min "
          f"{min(ratios_gm, default=float('nan')):.3f}x), {geo(ratios_loop):.3f}x the loop "
          f"(min {min(ratios_loop):.3f}x); above 1: mmtune faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
