"""The ways PyTorch can run the same MiniResNet, shared by train_throughput.py, time_to_accuracy.py
and gpu_throughput.py so that "PyTorch at its best" means the same thing in every comparison:

- eager:                 the module as written, NCHW (PyTorch's default layout);
- channels-last:         eager, weights and inputs in channels_last (NHWC) memory format;
- compile:               torch.compile of the module (inductor), NCHW;
- compile-channels-last: both;
- max-autotune:          torch.compile(mode="max-autotune"), channels_last: inductor's autotuned
                         kernels and, on a GPU, the step's graphs replayed as CUDA graphs. GPU
                         only (on a CPU it autotunes for minutes and brings nothing).

Only the model is compiled (the optimizer step stays eager), with dynamic=False: every batch shape
gets its own static graph, compiled during the caller's warm-up, so no recompilation falls in a
timed window (compiles_since() tells whether one did)."""
import torch

VARIANTS = ("eager", "channels-last", "compile", "compile-channels-last", "max-autotune")
CPU_VARIANTS = VARIANTS[:4]
LABELS = {"eager": "eager NCHW", "channels-last": "eager channels-last", "compile": "compile NCHW",
          "compile-channels-last": "compile channels-last", "max-autotune": "compile max-autotune (CUDA graphs)"}


def parse(text, allowed=VARIANTS):
    """A comma-separated list of variant names, checked; raises ValueError naming the bad one."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    for v in names:
        if v not in allowed:
            raise ValueError(f"unknown variant '{v}' (one of {', '.join(allowed)})")
    if not names:
        raise ValueError("no variant given")
    return names


def compiled(variant):
    return variant.startswith("compile") or variant == "max-autotune"


def channels_last(variant):
    return variant.endswith("channels-last") or variant == "max-autotune"


def supported(variant):
    """None when this torch can run the variant, else why not (torch 1.13 has no torch.compile)."""
    if compiled(variant) and not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    return None


def prepare(model, variant):
    """(callable model, input converter) for the variant. The returned callable shares its
    parameters and buffers with `model` (torch.compile wraps it, .to(memory_format) converts in
    place), so the optimizer and state_dict of `model` stay the ones in use."""
    fmt = torch.channels_last if channels_last(variant) else torch.contiguous_format
    model = model.to(memory_format=fmt)
    if variant == "max-autotune":
        model = torch.compile(model, mode="max-autotune", dynamic=False)
    elif compiled(variant):
        model = torch.compile(model, dynamic=False)
    return model, lambda x: x.contiguous(memory_format=fmt)


def compile_count():
    """Graphs dynamo has compiled so far in this process (0 without torch.compile)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return counters["stats"]["unique_graphs"]


def check_layout(model, x, variant):
    """Asserts that the variant really runs as it says: the first block's first convolution weight
    (cin > 1: with one input channel both layouts are the same strides) and the input in the
    claimed memory format, and for a compiled variant, a module wrapped by torch.compile. Catches a
    variant that silently runs as plain eager."""
    inner = getattr(model, "_orig_mod", model)
    weight = inner.layer1[0].conv1.weight
    if channels_last(variant):
        assert weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous(), \
            f"{variant}: conv1.weight is not channels_last"
        assert x.is_contiguous(memory_format=torch.channels_last), f"{variant}: input is not channels_last"
    else:
        assert weight.is_contiguous() and x.is_contiguous(), f"{variant}: not NCHW"
    assert compiled(variant) == (inner is not model), \
        f"{variant}: the model is {'not ' if compiled(variant) else ''}wrapped by torch.compile"
