"""PyTorch's side of the time-to-accuracy comparison (scripts/gpu_compare.sh, "accuracy" mode): the full
MiniResNet on Fashion-MNIST with configs/fashion_mnist.yaml's recipe -- batch 256, SGD lr 0.2
momentum 0.9 nesterov, weight decay 5e-4, linear warm-up for 200 steps then cosine to 0 per step,
random crop (padding 4, black) and horizontal flip, fp16 autocast with GradScaler, normalization
(x/255 - 0.2860) / 0.3530 -- evaluated on the test set after every epoch, stopping at the first
evaluation at or above --target. The clock starts when the process starts (imports included), as
cudagrad-train's does. Prints one JSON line. The data stays on the GPU (like data.gpu_resident)."""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

START = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from miniresnet import MiniResNet  # noqa: E402

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(folder, split, device):
    def find(name):
        for candidate in (name + ".gz", name):
            path = os.path.join(folder, candidate)
            if os.path.exists(path):
                return path
        raise SystemExit(f"{folder}: no {name}[.gz] (install dataset-fashion-mnist or pass --data)")
    images = read_idx(find(f"{split}-images-idx3-ubyte"))
    labels = read_idx(find(f"{split}-labels-idx1-ubyte"))
    x = (torch.from_numpy(images.copy()).float().div_(255) - MEAN) / STD
    return x.unsqueeze(1).to(device), torch.from_numpy(labels.astype(np.int64)).to(device)


def augment(x, gen):
    """Random crop with padding 4 (black = the normalized value of pixel 0) and horizontal flip."""
    n, _, h, w = x.shape
    black = -MEAN / STD
    padded = F.pad(x, (4, 4, 4, 4), value=black)
    dy = torch.randint(0, 9, (n,), device=x.device, generator=gen)
    dx = torch.randint(0, 9, (n,), device=x.device, generator=gen)
    rows = (dy.view(n, 1) + torch.arange(h, device=x.device).view(1, h)).view(n, 1, h, 1).expand(n, 1, h, w + 8)
    out = padded.gather(2, rows)
    cols = (dx.view(n, 1) + torch.arange(w, device=x.device).view(1, w)).view(n, 1, 1, w).expand(n, 1, h, w)
    out = out.gather(3, cols)
    flip = torch.rand(n, device=x.device, generator=gen) < 0.5
    return torch.where(flip.view(n, 1, 1, 1), out.flip(3), out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--target", type=float, default=0.93)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--warmup-steps", type=int, default=200)
    p.add_argument("--device", default="cuda")
    p.add_argument("--widths", default="64,128,256", help="smaller for a smoke test")
    p.add_argument("--limit", type=int, default=0, help="use only this many training images (smoke test)")
    a = p.parse_args()
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(42)
    x_train, y_train = load(a.data, "train", device)
    x_test, y_test = load(a.data, "t10k", device)
    if a.limit:
        x_train, y_train, x_test, y_test = x_train[:a.limit], y_train[:a.limit], x_test[:a.limit], y_test[:a.limit]
    widths = tuple(int(w) for w in a.widths.split(","))
    model = MiniResNet(1, 10, widths, (2,) * len(widths)).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    steps_per_epoch = len(x_train) // a.batch
    total = steps_per_epoch * a.epochs

    def lr_at(step):
        if step < a.warmup_steps:
            return a.lr * (step + 1) / a.warmup_steps
        t = (step - a.warmup_steps) / max(1, total - a.warmup_steps)
        return 0.5 * a.lr * (1 + math.cos(math.pi * min(t, 1.0)))

    scaler = torch.amp.GradScaler("cuda", enabled=cuda) if hasattr(torch.amp, "GradScaler") else \
        torch.cuda.amp.GradScaler(enabled=cuda)
    gen = torch.Generator(device=device).manual_seed(42)
    step = 0
    result = {"bench": "pytorch", "what": "time_to_accuracy", "target": a.target, "reached": False,
              "torch": torch.__version__}
    for epoch in range(a.epochs):
        model.train()
        order = torch.randperm(len(x_train), device=device, generator=gen)
        for b in range(steps_per_epoch):
            idx = order[b * a.batch:(b + 1) * a.batch]
            x, y = augment(x_train[idx], gen), y_train[idx]
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16, enabled=cuda):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            step += 1
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16, enabled=cuda):
            for i in range(0, len(x_test), 1000):
                correct += (model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum().item()
        accuracy = correct / len(x_test)
        print(f"epoch {epoch + 1}: test accuracy {accuracy:.4f} at {time.time() - START:.1f} s", file=sys.stderr)
        if accuracy >= a.target:
            result.update(reached=True, seconds=time.time() - START, epoch=epoch + 1, accuracy=accuracy)
            break
        result.update(epoch=epoch + 1, accuracy=accuracy, seconds=time.time() - START)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
