"""MiniResNet in PyTorch, written from shared/docs/miniresnet.md: the reference that cudagrad's
model must equal parameter for parameter (same state-dict keys in the same order, same shapes,
same initialization distributions). Run it to check the counts, names and init the spec lists."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); the shortcut is a 1x1 conv + BN
    (`downsample.0`, `downsample.1`) only when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        # Registration order is state-dict order: conv1, bn1, conv2, bn2, downsample (torchvision's).
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(out + shortcut)


class MiniResNet(nn.Module):
    """Stem (3x3 conv, BN, ReLU; no max-pool), one stage `layer{i}` per width with blocks[i-1]
    BasicBlocks (the first block of every stage after the first has stride 2), global average
    pool, `fc`."""

    def __init__(self, in_channels=3, num_classes=10, widths=(64, 128, 256), blocks=(2, 2, 2)):
        super().__init__()
        if len(widths) != len(blocks) or not widths:
            raise ValueError(f"widths {widths} and blocks {blocks} must be non-empty and of equal length")
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        cin = widths[0]
        for i, (width, count) in enumerate(zip(widths, blocks)):
            stage = []
            for j in range(count):
                stage.append(BasicBlock(cin, width, 2 if (i > 0 and j == 0) else 1))
                cin = width
            setattr(self, f"layer{i + 1}", nn.Sequential(*stage))
        self.num_stages = len(widths)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        # nn.Linear's own init already is uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and
        # bias, which is what the spec asks for.

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for i in range(self.num_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def spec_keys(widths=(64, 128, 256), blocks=(2, 2, 2)):
    """The state-dict keys in order, spelled out from the spec's naming rule (independently of
    the module above, so the self-check compares two derivations)."""
    bn = ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    keys = ["conv1.weight"] + [f"bn1.{s}" for s in bn]
    cin = widths[0]
    for i, (width, count) in enumerate(zip(widths, blocks)):
        for j in range(count):
            p = f"layer{i + 1}.{j}."
            keys += [p + "conv1.weight"] + [p + f"bn1.{s}" for s in bn]
            keys += [p + "conv2.weight"] + [p + f"bn2.{s}" for s in bn]
            if (i > 0 and j == 0) or cin != width:
                keys += [p + "downsample.0.weight"] + [p + f"downsample.1.{s}" for s in bn]
            cin = width
    return keys + ["fc.weight", "fc.bias"]


def count(model):
    """(trainable parameters, trainable tensors, state-dict entries)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return sum(p.numel() for p in params), len(params), len(model.state_dict())


def check_init(model):
    """Init distributions as the spec says; sample statistics, so loose bounds."""
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            fan_out = m.out_channels * m.kernel_size[0] * m.kernel_size[1]
            want, got = math.sqrt(2.0 / fan_out), m.weight.std().item()
            assert abs(got / want - 1) < 0.15, f"{name}: std {got:.4f}, Kaiming fan_out wants {want:.4f}"
        elif isinstance(m, nn.BatchNorm2d):
            assert torch.all(m.weight == 1) and torch.all(m.bias == 0), f"{name}: BN must start at 1, 0"
        elif isinstance(m, nn.Linear):
            bound = 1 / math.sqrt(m.in_features)
            for t in (m.weight, m.bias):
                assert t.abs().max().item() <= bound, f"{name}: beyond uniform bound {bound}"


if __name__ == "__main__":
    torch.manual_seed(0)
    checks = [  # (constructor arguments, (parameters, tensors, state-dict entries) from the spec)
        (dict(), (2777674, 47, 92)),
        (dict(in_channels=1), (2776522, 47, 92)),
        (dict(in_channels=1, widths=(16, 32, 64)), (174970, 47, 92)),
    ]
    for kwargs, expected in checks:
        model = MiniResNet(**kwargs)
        got = count(model)
        print(f"MiniResNet({kwargs}): {got[0]:,} parameters in {got[1]} tensors, {got[2]} state-dict entries")
        assert got == expected, f"expected {expected}"
        keys = list(model.state_dict().keys())
        want = spec_keys(kwargs.get("widths", (64, 128, 256)))
        assert keys == want, f"state-dict keys differ from the spec: {set(keys) ^ set(want)}"
        assert model.state_dict()["bn1.num_batches_tracked"].dtype == torch.int64
        check_init(model)
        out = model(torch.randn(2, kwargs.get("in_channels", 3), 32, 32))
        assert out.shape == (2, 10)
    print("OK: counts, state-dict keys and init match shared/docs/miniresnet.md")
