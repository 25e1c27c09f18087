"""Writes a golden file for one training step of a small MiniResNet in PyTorch, in float64 so the
reference itself carries no rounding worth mentioning: the initial state dict (init.<key>), the
batch (input, labels), the training-mode forward's logits and scalar loss, every parameter's
gradient (grad.<name>) and the full state dict after one optimizer step (after.<key>, running
statistics included). Everything the C++ side needs to replay the step (model shape, optimizer
hyper-parameters, BatchNorm constants) is in the metadata, so tests read it instead of repeating it.
tests/nn/pytorch_golden_test.cpp runs this and compares cudagrad's step against the file.
Usage: make_step_golden.py [--optimizer sgd|adamw] OUT.safetensors   (run with /usr/bin/python3)"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "pytorch"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from miniresnet import MiniResNet  # noqa: E402
import safetensors_io  # noqa: E402

SEED = 0
MODEL = dict(in_channels=1, num_classes=10, widths=(8, 16, 32), blocks=(1, 1, 1))
BATCH, IMAGE_SIZE = 8, 16


def make_optimizer(kind, params):
    """Returns (optimizer, hyper-parameters as metadata). Every hyper-parameter is spelled out,
    defaults included, so the file alone says what was run."""
    if kind == "sgd":
        hyper = dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=1e-4, nesterov=False)
        return torch.optim.SGD(params, **hyper), hyper
    hyper = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, amsgrad=False)
    opt = torch.optim.AdamW(params, lr=hyper["lr"], betas=(hyper["beta1"], hyper["beta2"]), eps=hyper["eps"],
                            weight_decay=hyper["weight_decay"], amsgrad=hyper["amsgrad"])
    return opt, hyper


def metadata_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument("out", help="the .safetensors file to write")
    args = parser.parse_args()

    torch.manual_seed(SEED)
    model = MiniResNet(**MODEL).double().train()
    tensors = {f"init.{k}": v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(BATCH, MODEL["in_channels"], IMAGE_SIZE, IMAGE_SIZE, dtype=torch.float64)
    y = torch.randint(0, MODEL["num_classes"], (BATCH,))
    opt, hyper = make_optimizer(args.optimizer, model.parameters())

    logits = model(x)  # training mode: batch statistics, and the running ones are updated
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()

    tensors.update(input=x, labels=y, logits=logits.detach(), loss=loss.detach())
    tensors.update({f"grad.{k}": p.grad for k, p in model.named_parameters()})
    tensors.update({f"after.{k}": v for k, v in model.state_dict().items()})
    metadata = dict(optimizer=args.optimizer, **hyper, **MODEL, batch=BATCH, image_size=IMAGE_SIZE, seed=SEED,
                    bn_eps=1e-5, bn_momentum=0.1, dtype="F64", steps=1, torch_version=torch.__version__)
    safetensors_io.save(args.out, tensors, {k: metadata_text(v) for k, v in metadata.items()})
    print(f"wrote {args.out}: {len(tensors)} tensors, {args.optimizer} step, loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
