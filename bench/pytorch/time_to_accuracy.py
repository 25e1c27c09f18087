"""PyTorch's side of the time-to-accuracy comparison (scripts/gpu_compare.sh, "accuracy" mode): the full
MiniResNet on Fashion-MNIST with the recipe read from --config (configs/fashion_mnist.yaml: model
widths and blocks, batch size, epochs, SGD lr/momentum/nesterov/weight decay, the warmup_cosine
schedule stepped per optimizer step, random crop with padding 4 (black) and horizontal flip when
data.augment, fp16 or bf16 autocast with GradScaler when amp.enabled), normalization
(x/255 - 0.2860) / 0.3530, the last smaller batch dropped as cudagrad's loader does. Evaluated on
the test set after every epoch, stopping at the first evaluation at or above --target. The clock
starts when the process starts (interpreter start-up and imports included), as cudagrad-train's
does. Prints one JSON line. The data stays on the GPU (like data.gpu_resident).
Smoke test anywhere: --device cpu --limit 512 --widths 8,16,32 --epochs 1."""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time



def process_start_time():
    """Wall-clock time at which this process started (Linux /proc), else now."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


START = process_start_time()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from miniresnet import MiniResNet  # noqa: E402

MEAN, STD = 0.2860, 0.3530


def read_recipe(path):
    """The two-level YAML of configs/*.yaml as {section: {key: value}}; PyYAML when installed, else a
    reader for that plain subset (scalars and [a, b] lists, # comments)."""
    try:
        import yaml
        with open(path) as f:
            return yaml.safe_load(f) or {}
    except ImportError:
        pass

    def scalar(text):
        text = text.strip()
        if text.startswith("[") and text.endswith("]"):
            return [scalar(v) for v in text[1:-1].split(",") if v.strip()]
        if text in ("true", "false"):
            return text == "true"
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text.strip("\"'")

    recipe, section = {}, None
    with open(path) as f:
        for raw in f:
            line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
            if not line.strip():
                continue
            key, _, value = line.strip().partition(":")
            if not raw.startswith((" ", "\t")):
                section = recipe.setdefault(key, {})
            elif section is not None:
                section[key] = scalar(value)
    return recipe


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=4 + 4 * dims).reshape(shape)


def load(folder, split, device):
    def find(name):
        for candidate in (name + ".gz", name):
            path = os.path.join(folder, candidate)
            if os.path.exists(path):
                return path
        raise SystemExit(f"{folder}: no {name}[.gz] (install dataset-fashion-mnist or pass --data)")
    images = read_idx(find(f"{split}-images-idx3-ubyte"))
    labels = read_idx(find(f"{split}-labels-idx1-ubyte"))
    x = (images.float().div_(255) - MEAN) / STD
    return x.unsqueeze(1).to(device), labels.long().to(device)


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
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(here, "..", "..", "configs", "fashion_mnist.yaml"))
    p.add_argument("--data", default=None, help="Fashion-MNIST folder (default: the config's data.path, "
                   "else /usr/share/datasets/fashion-mnist)")
    p.add_argument("--target", type=float, default=0.93)
    p.add_argument("--device", default="cuda")
    p.add_argument("--epochs", type=int, default=None, help="override train.epochs")
    p.add_argument("--widths", default=None, help="override model.widths, e.g. 8,16,32 for a smoke test")
    p.add_argument("--limit", type=int, default=0, help="use only this many images of each split (smoke test)")
    a = p.parse_args()
    r = read_recipe(a.config)
    model_cfg, data, optim, sched = r.get("model", {}), r.get("data", {}), r.get("optim", {}), r.get("sched", {})
    train, amp_cfg = r.get("train", {}), r.get("amp", {})
    if optim.get("name", "sgd") != "sgd" or sched.get("name", "warmup_cosine") != "warmup_cosine":
        raise SystemExit(f"{a.config}: this script mirrors sgd with warmup_cosine only")
    folder = a.data or data.get("path") or "/usr/share/datasets/fashion-mnist"
    epochs = a.epochs or int(train.get("epochs", 15))
    batch = int(data.get("batch_size", 256))
    lr, min_lr = float(optim.get("lr", 0.1)), float(sched.get("min_lr", 0.0))
    warmup_steps = int(sched.get("warmup_steps", 0))
    widths = tuple(int(w) for w in a.widths.split(",")) if a.widths else tuple(model_cfg.get("widths", [64, 128, 256]))
    blocks = tuple(model_cfg.get("blocks", [2] * len(widths)))
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    use_amp = cuda and bool(amp_cfg.get("enabled", False))  # autocast on the CPU smoke test: no
    amp_dtype = torch.bfloat16 if amp_cfg.get("dtype", "fp16") == "bf16" else torch.float16
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(int(train.get("seed", 42)))
    x_train, y_train = load(folder, "train", device)
    x_test, y_test = load(folder, "t10k", device)
    if a.limit:
        x_train, y_train, x_test, y_test = x_train[:a.limit], y_train[:a.limit], x_test[:a.limit], y_test[:a.limit]
    model = MiniResNet(int(model_cfg.get("in_channels", 1)), int(model_cfg.get("num_classes", 10)), widths,
                       blocks).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=float(optim.get("momentum", 0.0)),
                          nesterov=bool(optim.get("nesterov", False)),
                          weight_decay=float(optim.get("weight_decay", 0.0)))
    steps_per_epoch = len(x_train) // batch  # drop_last, as cudagrad's loader
    total = steps_per_epoch * epochs

    def lr_at(step):  # nn/lr_schedule.cpp's warmup_cosine
        if step < warmup_steps:
            return lr * (step + 1) / warmup_steps
        t = min((step - warmup_steps) / max(1, total - warmup_steps), 1.0)
        return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * t)) / 2

    # bf16 needs no loss scaling; fp16 does.
    scale = use_amp and amp_dtype == torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=scale) if hasattr(torch.amp, "GradScaler") else \
        torch.cuda.amp.GradScaler(enabled=scale)
    gen = torch.Generator(device=device).manual_seed(42)
    augment_on = bool(data.get("augment", False))
    step = 0
    result = {"bench": "pytorch", "what": "time_to_accuracy", "target": a.target, "reached": False,
              "torch": torch.__version__, "device": torch.cuda.get_device_name(device) if cuda else "cpu"}
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(x_train), device=device, generator=gen)
        for b in range(steps_per_epoch):
            idx = order[b * batch:(b + 1) * batch]
            x, y = x_train[idx], y_train[idx]
            if augment_on:
                x = augment(x, gen)
            if cuda:
                x = x.contiguous(memory_format=torch.channels_last)
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            step += 1
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
            for i in range(0, len(x_test), 1000):
                correct += (model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum().item()
        accuracy = correct / len(x_test)
        seconds = time.time() - START
        print(f"epoch {epoch + 1}: test accuracy {accuracy:.4f} at {seconds:.1f} s", file=sys.stderr)
        result.update(epoch=epoch + 1, accuracy=accuracy, seconds=seconds)
        if accuracy >= a.target:
            result["reached"] = True
            break
    print(json.dumps(result))


if __name__ == "__main__":
    main()
