"""Writes a golden file for one training step of a small MiniResNet in PyTorch (float64): the
initial state dict (init.*), the batch (input, labels), the forward's logits and loss, every
parameter's gradient (grad.*) and the state dict after one optimizer step (after.*), with the
optimizer's hyper-parameters in the metadata. tests/nn/pytorch_golden_test.cpp replays the step
in cudagrad and compares. Usage: make_step_golden.py [--optimizer sgd|adamw] OUT.safetensors"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "pytorch"))
sys.path.insert(0, os.path.dirname(__file__))
from miniresnet import MiniResNet  # noqa: E402
import safetensors_io  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument("out")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = MiniResNet(in_channels=1, num_classes=10, widths=(8, 16, 32), blocks=(1, 1, 1)).double().train()
    tensors = {f"init.{k}": v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(8, 1, 16, 16, dtype=torch.float64)
    y = torch.randint(0, 10, (8,))
    if args.optimizer == "sgd":
        hyper = dict(lr=0.1, momentum=0.9, weight_decay=1e-4)
        opt = torch.optim.SGD(model.parameters(), nesterov=False, **hyper)
    else:
        hyper = dict(lr=1e-3, weight_decay=0.01)
        opt = torch.optim.AdamW(model.parameters(), **hyper)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    tensors.update(input=x, labels=y, logits=logits.detach(), loss=loss.detach())
    tensors.update({f"grad.{k}": p.grad for k, p in model.named_parameters()})
    tensors.update({f"after.{k}": v for k, v in model.state_dict().items()})
    safetensors_io.save(args.out, tensors, dict(optimizer=args.optimizer, **hyper))


if __name__ == "__main__":
    main()
