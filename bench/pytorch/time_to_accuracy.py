"""PyTorch's side of the time-to-accuracy comparisons: scripts/gpu_compare.sh ("accuracy" mode, the
full MiniResNet with configs/fashion_mnist.yaml) and bench/cpu_time_to_accuracy.sh (the narrow one
with configs/fashion_mnist_cpu.yaml). The recipe is read from --config: model widths and blocks,
batch size, epochs, SGD lr/momentum/nesterov/weight decay, the warmup_cosine schedule stepped per
optimizer step, random crop with padding 4 (black) and horizontal flip when data.augment, fp16 or
bf16 autocast with GradScaler when amp.enabled (GPU only), train.threads (0 = all cores) as
torch.set_num_threads, train.max_steps, train.eval_batch_size; normalization
(x/255 - 0.2860) / 0.3530, the last smaller batch dropped as cudagrad's loader does. Evaluated on
the test set after every epoch (and where max_steps stops training mid-epoch, as cudagrad-train
does), stopping at the first evaluation at or above --target. The clock starts when the process
starts (interpreter start-up and imports included), as cudagrad-train's does. Prints one line per
evaluation on stderr, then one JSON line. The data stays on the device (like data.gpu_resident).
--variant picks how PyTorch runs the model (variants.py: eager, channels-last, compile,
compile-channels-last, max-autotune; default channels-last on a GPU, eager on the CPU). A compiled
variant is compiled before the clock's first epoch: one training step's forward and backward and the
evaluation's batch shapes run on the first batch, then the weights, batch-norm statistics and
gradients are put back as they were, so training is the same as eager's; that time is reported as
compile_seconds and taken out of every reported time (seconds_with_compile keeps it in). loss0 is
the first training step's loss (same seed, same first batch in every variant).
Exits 2 on a bad command line or config, 1 when the data cannot be read.
Smoke test anywhere: --device cpu --limit 512 --widths 8,16,32 --epochs 1."""
import argparse
import copy
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
import variants  # noqa: E402

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
        sys.exit(f"time_to_accuracy: error: {folder}: no {name}[.gz] (install dataset-fashion-mnist or pass "
                 f"--data)")
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


def bounded(kind, low, high=None):
    """An argparse type: a number of `kind` in [low, high]."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: '{text}'")
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high if high is not None else 'inf'}], "
                                             f"got {value}")
        return value
    return parse


def compile_warmup(model, run, to_input, opt, scaler, x, y, x_test, eval_batch, amp_dtype, use_amp, cuda):
    """Compiles what training and evaluation will run (torch.compile compiles on first call, one
    graph per mode and batch shape: dynamic=False), then puts the model back as it was: no
    optimizer step, the batch-norm buffers restored, the gradients dropped. Returns its seconds."""
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    saved = copy.deepcopy(model.state_dict())
    model.train()
    with torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
        loss = F.cross_entropy(run(to_input(x)), y)
    scaler.scale(loss).backward()
    model.eval()
    shapes = {min(eval_batch, len(x_test))} | ({len(x_test) % eval_batch} if len(x_test) % eval_batch else set())
    with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
        for n in sorted(shapes, reverse=True):  # the order evaluation meets them
            run(to_input(x_test[:n]))
    opt.zero_grad(set_to_none=True)
    model.load_state_dict(saved)
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(here, "..", "..", "configs", "fashion_mnist.yaml"))
    p.add_argument("--data", default=None, help="Fashion-MNIST folder (default: the config's data.path, "
                   "else /usr/share/datasets/fashion-mnist)")
    p.add_argument("--target", type=bounded(float, 0.0, 1.0), default=0.93)
    p.add_argument("--device", default="cuda")
    p.add_argument("--epochs", type=bounded(int, 1), default=None, help="override train.epochs")
    p.add_argument("--widths", default=None, help="override model.widths, e.g. 8,16,32 for a smoke test")
    p.add_argument("--limit", type=bounded(int, 0), default=0,
                   help="use only this many images of each split (smoke test)")
    p.add_argument("--threads", type=bounded(int, 0), default=None,
                   help="override train.threads: torch.set_num_threads (0 = all cores)")
    p.add_argument("--variant", default=None, choices=variants.VARIANTS,
                   help="how PyTorch runs the model (default: channels-last on a GPU, eager on the CPU)")
    p.add_argument("--max-steps", type=bounded(int, 0), default=None,
                   help="override train.max_steps: stop after this many optimizer steps (0 = no cap), as "
                        "cudagrad-train does; the schedule still spans every epoch")
    a = p.parse_args()
    if not os.path.isfile(a.config):
        p.error(f"--config {a.config}: no such file")
    r = read_recipe(a.config)
    model_cfg, data, optim, sched = r.get("model", {}), r.get("data", {}), r.get("optim", {}), r.get("sched", {})
    train, amp_cfg = r.get("train", {}), r.get("amp", {})
    if optim.get("name", "sgd") != "sgd" or sched.get("name", "warmup_cosine") != "warmup_cosine":
        p.error(f"{a.config}: this script mirrors sgd with warmup_cosine only")
    folder = a.data or data.get("path") or "/usr/share/datasets/fashion-mnist"
    epochs = a.epochs or int(train.get("epochs", 15))
    batch = int(data.get("batch_size", 256))
    eval_batch = int(train.get("eval_batch_size", 256))  # cudagrad's default
    lr, min_lr = float(optim.get("lr", 0.1)), float(sched.get("min_lr", 0.0))
    warmup_steps = int(sched.get("warmup_steps", 0))
    max_steps = a.max_steps if a.max_steps is not None else int(train.get("max_steps", 0))
    threads = a.threads if a.threads is not None else int(train.get("threads", 0))
    try:
        widths = tuple(int(w) for w in a.widths.split(",")) if a.widths else \
            tuple(model_cfg.get("widths", [64, 128, 256]))
    except ValueError:
        p.error(f"--widths must look like 16,32,64, got '{a.widths}'")
    blocks = tuple(model_cfg.get("blocks", [2] * len(widths)))
    # Debian's build starts with 1 thread on some machines: always set the count explicitly, so that it
    # equals cudagrad-train's train.threads.
    torch.set_num_threads(threads or os.cpu_count() or 1)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    variant = a.variant or ("channels-last" if cuda else "eager")
    why = variants.supported(variant)
    if why:
        p.error(f"--variant {variant}: {why}")
    use_amp = cuda and bool(amp_cfg.get("enabled", False))  # autocast on the CPU: no
    amp_dtype = torch.bfloat16 if amp_cfg.get("dtype", "fp16") == "bf16" else torch.float16
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(int(train.get("seed", 42)))
    x_train, y_train = load(folder, "train", device)
    x_test, y_test = load(folder, "t10k", device)
    if a.limit:
        x_train, y_train, x_test, y_test = x_train[:a.limit], y_train[:a.limit], x_test[:a.limit], y_test[:a.limit]
    model = MiniResNet(int(model_cfg.get("in_channels", 1)), int(model_cfg.get("num_classes", 10)), widths,
                       blocks).to(device)
    run, to_input = variants.prepare(model, variant)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=float(optim.get("momentum", 0.0)),
                          nesterov=bool(optim.get("nesterov", False)),
                          weight_decay=float(optim.get("weight_decay", 0.0)))
    steps_per_epoch = len(x_train) // batch  # drop_last, as cudagrad's loader
    if steps_per_epoch == 0:
        p.error(f"data.batch_size={batch} is larger than the {len(x_train)} training images")
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
    compile_seconds = 0.0
    if variants.compiled(variant):
        compile_seconds = compile_warmup(model, run, to_input, opt, scaler, x_train[:batch], y_train[:batch], x_test,
                                         eval_batch, amp_dtype, use_amp, cuda)
    variants.check_layout(run, to_input(x_train[:batch]), variant)
    step = 0
    loss0 = None
    train_seconds = 0.0  # the training loops alone, evaluation left out: for images/s
    result = {"bench": "pytorch", "what": "time_to_accuracy", "target": a.target, "reached": False,
              "torch": torch.__version__, "device": torch.cuda.get_device_name(device) if cuda else "cpu",
              "threads": torch.get_num_threads(), "parameters": sum(q.numel() for q in model.parameters()),
              "variant": variant, "compile_seconds": compile_seconds, "python": sys.executable, "evals": []}
    for epoch in range(epochs):
        model.train()
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        order = torch.randperm(len(x_train), device=device, generator=gen)
        for b in range(steps_per_epoch):
            idx = order[b * batch:(b + 1) * batch]
            x, y = x_train[idx], y_train[idx]
            if augment_on:
                x = augment(x, gen)
            x = to_input(x)
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
                loss = F.cross_entropy(run(x), y)
            if step == 0:
                loss0 = loss.item()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            step += 1
            if max_steps and step >= max_steps:
                break
        if cuda:
            torch.cuda.synchronize()
        train_seconds += time.perf_counter() - t0
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
            for i in range(0, len(x_test), eval_batch):
                correct += (run(to_input(x_test[i:i + eval_batch])).argmax(1) == y_test[i:i + eval_batch]).sum().item()
        accuracy = correct / len(x_test)
        seconds = time.time() - START - compile_seconds
        print(f"epoch {epoch + 1}: test accuracy {accuracy:.4f} at {seconds:.1f} s", file=sys.stderr)
        result["evals"].append({"epoch": epoch + 1, "step": step, "accuracy": accuracy, "seconds": seconds,
                                "seconds_with_compile": seconds + compile_seconds})
        result.update(epoch=epoch + 1, accuracy=accuracy, seconds=seconds)
        if accuracy >= a.target:
            result["reached"] = True
            break
        if max_steps and step >= max_steps:
            break
    result.update(loss0=loss0, steps=step, train_images=step * batch, train_seconds=train_seconds,
                  images_per_s=step * batch / max(train_seconds, 1e-9), cpu_seconds=time.process_time())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
