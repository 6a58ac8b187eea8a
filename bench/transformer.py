#!/usr/bin/env python3
"""A Llama-style decoder served end to end: PyTorch eager (cuBLAS), torch.compile
(mode="max-autotune": Triton) and mmtune (its Linear layers and gated MLPs swapped in by
mmtune.torch.swap_linear, each decode step a CUDA graph; "mmtune+compile": the same model
under torch.compile(fullgraph=True), which fuses what is not a GEMM), side by side in one run;
"eager+graph" is eager with each decode step a CUDA graph too, so that the decode comparison
with mmtune is of kernels, not of launches.  "mmtune-fp8" (and "mmtune-fp8+compile") is mmtune
with FP8 weights: swap_linear's fp8 recipe --fp8-recipe (row: per output channel and per token;
block: 128 x 128 and 1 x 128; tensor), the activations quantized at each call.

Random weights, 8B-class dimensions by default (hidden 4096, MLP 14336, 32 heads, 8 KV heads),
a few layers, PyTorch's own attention (scaled_dot_product_attention) over a static KV cache.
For each mode: the prefill of --prefill tokens (batch 1), then --steps decode steps at each
batch of --batches; printed: prefill ms and tokens/s, decode ms a step (median) and tokens/s,
and each mode's last logits against eager's (max |difference| over max |logit|).

    PYTHONPATH=python MMTUNE_LIBRARY=build/runtime/libmmtune.so \\
        python3 bench/transformer.py --layers 4 --batches 1,8,32
    python3 bench/transformer.py --tiny --device cpu --modes eager   # a smoke test, no GPU
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(v + self.eps)).to(x.dtype) * self.weight


class MLP(torch.nn.Module):
    """transformers' LlamaMLP: what mmtune.torch.swap_linear turns into one gated call."""

    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, inter, bias=False)
        self.up_proj = torch.nn.Linear(hidden, inter, bias=False)
        self.down_proj = torch.nn.Linear(inter, hidden, bias=False)
        self.act_fn = torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def rope(x, pos, theta=500000.0):
    """Rotary embedding of x (batch, heads, tokens, dim) at positions pos (tokens,)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos.float()[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class Attention(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, hidden // heads
        self.q_proj = torch.nn.Linear(hidden, hidden, bias=False)
        self.k_proj = torch.nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.v_proj = torch.nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.o_proj = torch.nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, pos, cache_k, cache_v, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        q, k = rope(q, pos), rope(k, pos)
        cache_k[:b].index_copy_(2, pos, k)  # the static cache: its positions pos
        cache_v[:b].index_copy_(2, pos, v)
        o = F.scaled_dot_product_attention(q, cache_k[:b], cache_v[:b], attn_mask=mask,
                                           enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))


class Layer(torch.nn.Module):
    def __init__(self, hidden, inter, heads, kv_heads):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = MLP(hidden, inter)

    def forward(self, x, pos, cache_k, cache_v, mask):
        x = x + self.self_attn(self.input_layernorm(x), pos, cache_k, cache_v, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(a.vocab, a.hidden)
        self.layers = torch.nn.ModuleList(
            Layer(a.hidden, a.inter, a.heads, a.kv_heads) for _ in range(a.layers))
        self.norm = RMSNorm(a.hidden)
        self.lm_head = torch.nn.Linear(a.hidden, a.vocab, bias=False)

    def forward(self, tokens, pos, caches, max_len):
        """Logits of tokens (batch, t) at positions pos (t,), the cache filled at pos."""
        t = tokens.shape[1]
        # token i sees cache positions <= pos[i]
        mask = torch.arange(max_len, device=tokens.device)[None, :] <= pos[:, None]
        mask = mask.view(1, 1, t, max_len)
        x = self.embed_tokens(tokens)
        for layer, (ck, cv) in zip(self.layers, caches):
            x = layer(x, pos, ck, cv, mask)
        return self.lm_head(self.norm(x))


def caches_for(a, batch, max_len, device, dtype):
    dim = a.hidden // a.heads
    return [(torch.zeros(batch, a.kv_heads, max_len, dim, device=device, dtype=dtype),
             torch.zeros(batch, a.kv_heads, max_len, dim, device=device, dtype=dtype))
            for _ in range(a.layers)]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_mode(mode, model, a, device, dtype):
    """{"prefill_ms", "decode": {batch: step ms}, "logits": {batch: last step's logits}}."""
    max_len = a.prefill + a.steps + 1
    step = model
    if mode == "compile":
        step = torch.compile(model, mode="max-autotune")
    elif mode.startswith("mmtune") and mode.endswith("+compile"):  # Inductor fuses the rest
        step = torch.compile(model, fullgraph=True)
    gen = torch.Generator(device="cpu").manual_seed(1)
    prompt = torch.randint(0, a.vocab, (1, a.prefill), generator=gen).to(device)
    out = {"decode": {}, "logits": {}}
    with torch.inference_mode():
        caches = caches_for(a, max(a.batches), max_len, device, dtype)
        pos = torch.arange(a.prefill, device=device)
        times = []
        for _ in range(3):  # the first: compiles, tunes, captures
            sync(device)
            t0 = time.perf_counter()
            step(prompt, pos, caches, max_len)
            sync(device)
            times.append(time.perf_counter() - t0)
        out["prefill_ms"] = 1e3 * min(times[1:])
        for b in a.batches:
            tok = torch.randint(0, a.vocab, (b, 1), generator=gen).to(device)
            p = torch.full((1,), a.prefill, device=device, dtype=torch.long)
            call = lambda: step(tok, p, caches, max_len)  # noqa: E731
            if (mode.startswith("mmtune") or mode == "eager+graph") and device.type == "cuda":
                for _ in range(2):
                    call()  # compiles each kernel outside the capture
                sync(device)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    logits = call()
                call = lambda: (g.replay(), logits)[1]  # noqa: E731
            for _ in range(3):
                call()
            ms = []
            for i in range(a.steps):
                p.fill_(a.prefill + i)
                sync(device)
                t0 = time.perf_counter()
                logits = call()
                sync(device)
                ms.append(1e3 * (time.perf_counter() - t0))
            out["decode"][b] = statistics.median(ms)
            out["logits"][b] = logits.float().clone()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--inter", type=int, default=14336)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--modes", default="eager,eager+graph,compile,mmtune,mmtune+compile")
    ap.add_argument("--fp8-recipe", default="row", choices=("row", "block", "tensor"),
                    help="the mmtune-fp8 modes' weights and activations (mmtune.torch.FP8_RECIPES)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="small dimensions: a smoke test")
    a = ap.parse_args()
    if a.tiny:
        a.layers, a.hidden, a.inter, a.heads, a.kv_heads, a.vocab = 2, 128, 256, 4, 2, 512
        a.prefill, a.steps = min(a.prefill, 16), min(a.steps, 4)
    a.batches = [int(b) for b in a.batches.split(",")]
    device, dtype = torch.device(a.device), getattr(torch, a.dtype)
    torch.manual_seed(0)
    base = Decoder(a).to(device, dtype).eval()
    if device.type == "cuda":
        print(f"device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print(f"{a.layers} layers, hidden {a.hidden}, MLP {a.inter}, heads {a.heads}/{a.kv_heads}, "
          f"vocab {a.vocab}, {a.dtype}; prefill {a.prefill} tokens, {a.steps} decode steps")
    results = {}
    for mode in a.modes.split(","):
        model = base
        if mode.startswith("mmtune"):
            import copy

            import mmtune.torch as mt
            model = mt.swap_linear(copy.deepcopy(base),
                                   fp8=a.fp8_recipe if mode.startswith("mmtune-fp8") else None)
        r = results[mode] = run_mode(mode, model, a, device, dtype)
        line = f"{mode:10s} prefill {r['prefill_ms']:9.2f} ms ({a.prefill / r['prefill_ms'] * 1e3:9.0f} tok/s)"
        for b, ms in r["decode"].items():
            line += f" | B={b}: {ms:7.3f} ms, {b / ms * 1e3:8.0f} tok/s"
        print(line, flush=True)
    if "eager" in results:
        for mode, r in results.items():
            if mode == "eager":
                continue
            for b, lg in r["logits"].items():
                ref = results["eager"]["logits"][b]
                rel = (lg - ref).abs().max().item() / (ref.abs().max().item() or 1.0)
                print(f"{mode} vs eager, B={b}: logits max |diff| / max |logit| = {rel:.2e}; "
                      f"top-1 agrees on {(lg.argmax(-1) == ref.argmax(-1)).float().mean().item():.0%}")
            for b in r["decode"]:
                e = results["eager"]
                print(f"{mode} over eager, B={b}: decode {e['decode'][b] / r['decode'][b]:.3f}x, "
                      f"prefill {e['prefill_ms'] / r['prefill_ms']:.3f}x")


if __name__ == "__main__":
    main()
