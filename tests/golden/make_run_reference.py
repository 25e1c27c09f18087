"""Writes the reference for a whole data-parallel training run of the narrow MiniResNet (the CPU
config's model on 28x28 images): two DDP ranks, a few SGD steps, simulated in one process. The
same run is made three times from one float64 initialization: in float64 (f64.<key>, the
reference), and in float32 twice, NCHW (f32.<key>) and channels-last (f32cl.<key>): PyTorch
float32 in two summation orders, whose distance from float64 is the rounding a float32 engine is
entitled to. Each file holds the initial state dict (init.<key>), the images and labels of every
micro-batch of every rank, and the three final state dicts (parameters and BatchNorm running
statistics; num_batches_tracked, an integer count, is left out). Everything the C++ side needs to
replay the run is in the metadata. tests/dist/pytorch_run_fidelity_test.cpp runs this.

Cases (DDP's semantics, which cudagrad's DDP and trainer follow):
  accumulation: 2 micro-batches per step per rank, plain BatchNorm. Each micro-batch's mean loss is
    divided by the micro-batch count (train/step.cpp), each rank sums its micro-batches' gradients
    (no_sync), and the ranks' sums are averaged. DDP broadcasts rank 0's buffers before every
    forward, so the final running statistics are those of rank 0's batches alone: rank 1's
    forwards here update a copy that is then thrown away.
  sync_bn: SyncBatchNorm, 1 micro-batch per step: the ranks' batches normalized together, which is
    plain BatchNorm over their union (running variance unbiased by the union's count - 1, as both
    PyTorch and cudagrad do), and the average of the ranks' mean losses is the union's mean loss.
Images of (step, rank, micro) start at ((step * world + rank) * micro_batches + micro) * batch.
--seed S draws another initialization and other batches (default 0).
Usage: make_run_reference.py --case accumulation|sync_bn [--seed S] OUT.safetensors   (run with /usr/bin/python3)"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "pytorch"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from miniresnet import MiniResNet  # noqa: E402
import safetensors_io  # noqa: E402
from make_step_golden import metadata_text  # noqa: E402

MODEL = dict(in_channels=1, num_classes=10, widths=(16, 32, 64), blocks=(2, 2, 2))
IMAGE_SIZE, WORLD, STEPS, BATCH = 28, 2, 4, 8  # BATCH: images per rank per micro-batch
# The CPU config's SGD, at a tenth of its peak lr (it warms up for 100 steps from 0): at a constant
# 0.1 from the first step, PyTorch float32 itself ended 10-25% from float64 on BatchNorm biases and
# 1e-3 on the median tensor after 4 steps, a run too chaotic to measure rounding by.
OPTIM = dict(lr=0.01, momentum=0.9, dampening=0.0, weight_decay=5e-4, nesterov=True)  # constant lr
CASES = {"accumulation": dict(micro_batches=2, sync_batchnorm=False),
         "sync_bn": dict(micro_batches=1, sync_batchnorm=True)}


def batch_slice(step, rank, micro, micro_batches, count=1):
    """The images of `count` consecutive micro-batches from (step, rank, micro) on."""
    first = ((step * WORLD + rank) * micro_batches + micro) * BATCH
    return slice(first, first + count * BATCH)


def rank_gradients(model, x, y, step, rank, micro_batches):
    """One rank's accumulated gradients for `step`: each micro-batch's loss divided by their count."""
    for p in model.parameters():
        p.grad = None
    for micro in range(micro_batches):
        s = batch_slice(step, rank, micro, micro_batches)
        (F.cross_entropy(model(x[s]), y[s]) / micro_batches).backward()
    return [p.grad for p in model.parameters()]


def step_gradients(model, x, y, step, case):
    """The gradients every rank holds after DDP's all-reduce, and rank 0's buffers left in `model`."""
    if case["sync_batchnorm"]:  # one micro-batch: the union of the ranks' batches, its mean loss
        for p in model.parameters():
            p.grad = None
        s = batch_slice(step, 0, 0, 1, count=WORLD)
        F.cross_entropy(model(x[s]), y[s]).backward()
        return
    rank0_buffers = None
    per_rank = []
    for rank in range(WORLD):
        if rank == 1:
            rank0_buffers = {k: b.clone() for k, b in model.named_buffers()}
        per_rank.append(rank_gradients(model, x, y, step, rank, case["micro_batches"]))
    with torch.no_grad():
        for k, b in model.named_buffers():
            b.copy_(rank0_buffers[k])
        for p, *grads in zip(model.parameters(), *per_rank):
            p.grad = sum(grads[1:], grads[0]) / WORLD


def train(init, x, y, case, dtype, channels_last):
    """The final state dict of the run in `dtype` (and memory format), num_batches_tracked left out."""
    model = MiniResNet(**MODEL).to(dtype).train()
    model.load_state_dict(init)  # cast to dtype on copy
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    x = x.to(dtype).contiguous(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), **OPTIM)
    for step in range(STEPS):
        step_gradients(model, x, y, step, case)
        opt.step()
    return {k: v.detach().contiguous() for k, v in model.state_dict().items() if v.is_floating_point()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=sorted(CASES), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("out", help="the .safetensors file to write")
    args = parser.parse_args()
    case = CASES[args.case]

    # Debian's torch starts with 1 thread here: the float64 run (reference BLAS) takes most of the time.
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count()))
    torch.manual_seed(args.seed)
    model = MiniResNet(**MODEL).double()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    images = STEPS * WORLD * case["micro_batches"] * BATCH
    x = torch.randn(images, MODEL["in_channels"], IMAGE_SIZE, IMAGE_SIZE, dtype=torch.float64)
    y = torch.randint(0, MODEL["num_classes"], (images,))

    tensors = {f"init.{k}": v for k, v in init.items()}
    tensors.update(input=x, labels=y)
    for prefix, dtype, channels_last in (("f64", torch.float64, False), ("f32", torch.float32, False),
                                         ("f32cl", torch.float32, True)):
        final = train(init, x, y, case, dtype, channels_last)
        tensors.update({f"{prefix}.{k}": v for k, v in final.items()})
    metadata = dict(case=args.case, **case, world=WORLD, steps=STEPS, batch=BATCH, image_size=IMAGE_SIZE, **MODEL,
                    optimizer="sgd", **OPTIM, bn_eps=1e-5, bn_momentum=0.1, seed=args.seed,
                    torch_version=torch.__version__)
    safetensors_io.save(args.out, tensors, {k: metadata_text(v) for k, v in metadata.items()})
    print(f"wrote {args.out}: {len(tensors)} tensors, case {args.case}")


if __name__ == "__main__":
    main()
