"""MiniResNet in PyTorch, written from shared/docs/miniresnet.md: the reference that cudagrad's
model must equal parameter for parameter (same state-dict keys, shapes and initialization).
Run it to check the parameter counts the spec lists."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
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
    def __init__(self, in_channels=3, num_classes=10, widths=(64, 128, 256), blocks=(2, 2, 2)):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        cin = widths[0]
        for i, (w, n) in enumerate(zip(widths, blocks)):
            layers = []
            for j in range(n):
                layers.append(BasicBlock(cin, w, 2 if (i > 0 and j == 0) else 1))
                cin = w
            setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
        self.num_stages = len(widths)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        # nn.Linear's default init is uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), as the spec says.

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for i in range(self.num_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def count(model):
    params = [p for p in model.parameters() if p.requires_grad]
    return sum(p.numel() for p in params), len(params), len(model.state_dict())


if __name__ == "__main__":
    checks = [
        (dict(), (2777674, 47, 92)),
        (dict(in_channels=1), (2776522, 47, 92)),
        (dict(in_channels=1, widths=(16, 32, 64)), (174970, 47, 92)),
    ]
    for kwargs, expected in checks:
        got = count(MiniResNet(**kwargs))
        print(f"MiniResNet({kwargs}): {got[0]:,} parameters in {got[1]} tensors, {got[2]} state-dict entries")
        assert got == expected, f"expected {expected}"
    print("OK: counts match shared/docs/miniresnet.md")
