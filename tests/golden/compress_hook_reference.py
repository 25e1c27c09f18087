"""The gradient compression's reference in PyTorch, for W ranks in one process: writes the
gradients every rank ends with, computed two ways. Used by tests/dist/grad_compression_test.cpp.
Usage: compress_hook_reference.py fp16|bf16 WORLD COUNT IN OUT_DIVIDE_FIRST OUT_STOCK_HOOK
IN: WORLD * COUNT float32 (rank after rank), each rank's bucket. Both outputs: COUNT float32.

OUT_DIVIDE_FIRST is what cudagrad's dist.grad_compression computes, with PyTorch's own ops: each
rank's float32 bucket multiplied by the float32 1/W (what torch's CUDA `div_(W)` does), then
`.to(torch.float16 / torch.bfloat16)`, the ranks' 16-bit tensors summed in rank order in the
16-bit type (torch's CPU addition, rounded after each addition, as cudagrad's wire does), and the
sum cast back to float32.

OUT_STOCK_HOOK is PyTorch's stock fp16_compress_hook / bf16_compress_hook
(torch.distributed.algorithms.ddp_comm_hooks.default_hooks), which casts to 16 bits first and
divides after (`buffer.to(dtype).div_(world_size)`): the hook's collective is stood in for, as
dist.all_reduce recording each rank's 16-bit tensor and returning a future; once every rank has
called the hook, the recorded tensors are summed the same way and every future receives the sum,
which runs the hook's own decompress callback. The C++ test documents where the two differ.
"""
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks


class Group:
    def __init__(self, world):
        self.world = world

    def size(self):
        return self.world


class Bucket:
    def __init__(self, tensor):
        self.tensor = tensor

    def buffer(self):
        return self.tensor


class Work:
    def __init__(self, future):
        self.future = future

    def get_future(self):
        return self.future


def rank_order_sum(tensors):
    total = tensors[0].clone()
    for t in tensors[1:]:
        total = total + t  # 16-bit + 16-bit: rounded to the 16-bit type
    return total


def divide_first(grads, world, dtype):
    inverse = torch.tensor(np.float32(1) / np.float32(world))  # float32 1/W, correctly rounded
    sent = [torch.from_numpy(grads[r].copy()).mul(inverse).to(dtype) for r in range(world)]
    assert all(t.dtype == dtype for t in sent)
    return rank_order_sum(sent).to(torch.float32)


def stock_hook(grads, world, kind):
    hook = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}[kind]
    sent, futures = [], []

    def fake_all_reduce(tensor, group=None, async_op=False):
        sent.append(tensor)
        futures.append(torch.futures.Future())
        return Work(futures[-1])

    dist.all_reduce = fake_all_reduce
    buckets = [Bucket(torch.from_numpy(grads[r].copy())) for r in range(world)]
    results = [hook(Group(world), b) for b in buckets]
    total = rank_order_sum(sent)
    for f in futures:
        f.set_result([total.clone()])
    out = [r.wait() for r in results]
    for o in out[1:]:
        assert torch.equal(o, out[0])
    return out[0]


def main():
    kind, world, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    path_in, path_divide_first, path_stock = sys.argv[4], sys.argv[5], sys.argv[6]
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[kind]
    grads = np.fromfile(path_in, dtype=np.float32).reshape(world, count)
    for result, path in ((divide_first(grads, world, dtype), path_divide_first),
                         (stock_hook(grads, world, kind), path_stock)):
        assert result.dtype == torch.float32
        result.numpy().astype(np.float32).tofile(path)


if __name__ == "__main__":
    main()
