"""Runs PyTorch's own fp16_compress_hook / bf16_compress_hook (torch.distributed.algorithms.
ddp_comm_hooks.default_hooks) for W ranks in one process and writes the gradients every rank ends
with. Used by tests/dist/grad_compression_test.cpp (PyTorchHook.*).
Usage: compress_hook_reference.py fp16|bf16 WORLD COUNT IN OUT
IN: WORLD * COUNT float32 (rank after rank), each rank's bucket. OUT: COUNT float32.
The hook's collective is stood in for: dist.all_reduce records each rank's 16-bit tensor and
returns a future; once every rank has called the hook, the recorded tensors are summed in rank
order in the 16-bit type (torch's CPU addition, rounded after each addition, as cudagrad's wire
does) and every future receives the sum, which runs the hook's own decompress callback.
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


def main():
    kind, world, count, path_in, path_out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    hook = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}[kind]
    grads = np.fromfile(path_in, dtype=np.float32).reshape(world, count)
    sent, futures = [], []

    def fake_all_reduce(tensor, group=None, async_op=False):
        sent.append(tensor)
        futures.append(torch.futures.Future())
        return Work(futures[-1])

    dist.all_reduce = fake_all_reduce
    buckets = [Bucket(torch.from_numpy(grads[r].copy())) for r in range(world)]
    results = [hook(Group(world), b) for b in buckets]
    total = sent[0].clone()
    for t in sent[1:]:
        total = total + t  # 16-bit + 16-bit: rounded to the 16-bit type
    for f in futures:
        f.set_result([total.clone()])
    out = [r.wait() for r in results]
    for o in out[1:]:
        assert torch.equal(o, out[0])
    assert out[0].dtype == torch.float32
    out[0].numpy().astype(np.float32).tofile(path_out)


if __name__ == "__main__":
    main()
