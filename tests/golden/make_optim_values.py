"""Prints the expected values in tests/kernels/optim_test.cpp: torch.optim.SGD and AdamW run for
three steps on p = [1, -2, 0.5] (float32) with gradients [0.1, 0.2, -0.3] * step, printing
p.tolist() with "%.9g" after each step, and AdamW's exp_avg / exp_avg_sq after the last step of
the first AdamW case. Regenerate with /usr/bin/python3 tests/golden/make_optim_values.py and paste
the rows into the test (the case names match the test names).
"""
import torch

CASES = [
    ("SgdKernel.PlainSgdNeedsNoBuffer", torch.optim.SGD, dict(lr=0.1)),
    ("SgdKernel.WeightDecayWithoutMomentumMatchesPyTorch", torch.optim.SGD, dict(lr=0.1, weight_decay=0.5)),
    ("SgdKernel.MomentumAndWeightDecayMatchPyTorch", torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("SgdKernel.FirstStepIgnoresDampeningLikePyTorch", torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.5)),
    ("SgdKernel.NesterovMatchesPyTorch", torch.optim.SGD,
     dict(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)),
    ("AdamWKernel.BiasCorrectionAndDecoupledDecayMatchPyTorch", torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    ("AdamWKernel.OtherBetasAndEpsMatchPyTorch", torch.optim.AdamW,
     dict(lr=0.05, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.0)),
]


def row(values):
    return "{" + ", ".join("%.9gf" % v for v in values) + "}"


def main():
    for name, optimizer, hyper in CASES:
        p = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float32, requires_grad=True)
        opt = optimizer([p], **hyper)
        rows = []
        for step in (1, 2, 3):
            p.grad = torch.tensor([0.1, 0.2, -0.3], dtype=torch.float32) * step
            opt.step()
            rows.append(row(p.detach().tolist()))
        print(f"{name}: {{{', '.join(rows)}}}")
        if name.startswith("AdamWKernel.BiasCorrection"):
            state = opt.state[p]
            print(f"  exp_avg {row(state['exp_avg'].tolist())}  exp_avg_sq {row(state['exp_avg_sq'].tolist())}")


if __name__ == "__main__":
    main()
