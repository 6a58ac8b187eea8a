"""mmtune.nn: the PyTorch modules of mmtune.torch under the name torch users look for.

    import mmtune.nn
    layer = mmtune.nn.Linear(4096, 14336, act="silu", device="cuda", dtype=torch.bfloat16)
    mmtune.nn.swap_linear(model)              # nn.Linear layers and Llama-style gated MLPs
    mmtune.nn.swap_linear(model, fp8="row")   # the same on FP8 weights (inference)

The classes are mmtune.torch's (importing this imports it, which registers the operators);
mmtune.torch's docstrings say what each does."""

from .torch import FP8_RECIPES, Fp8GatedMLP, Fp8Linear, GatedMLP, Linear, swap_linear

__all__ = ["Linear", "GatedMLP", "Fp8Linear", "Fp8GatedMLP", "swap_linear", "FP8_RECIPES"]
