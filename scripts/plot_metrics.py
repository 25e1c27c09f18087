#!/usr/bin/python3
"""Draws a training run's curves from its metrics.jsonl (what cudagrad-train writes in output.dir).

Usage: scripts/plot_metrics.py RUN_DIR [RUN_DIR ...] [-o FILE.png]

Four panels against the optimizer step: loss and accuracy (train: the windowed means of the logged
steps; eval: the test set after each epoch), the learning rate, and training images/s. Several runs
are overlaid, each labelled with its folder's name. The PNG goes to FILE.png, by default
RUN_DIR/curves.png (the first RUN_DIR's when there are several); its path is printed.
Exit codes: 0 written, 1 no usable records, 2 bad arguments or a missing or malformed metrics file.
Needs Debian's python3-matplotlib (scripts/install_deps.sh installs it).
"""
import argparse
import json
import os
import sys


def fail(code, message):
    print(f"plot_metrics: error: {message}", file=sys.stderr)
    sys.exit(code)


def read_run(run_dir):
    """{kind: {step: record}} from RUN_DIR/metrics.jsonl; a later record of the same step wins
    (a resumed run appends to the file and may repeat steps)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        fail(2, f"{path} not found (is {run_dir} a cudagrad-train output.dir?)")
    by_kind = {"train": {}, "eval": {}}
    with open(path) as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if number == len(lines):  # a run still writing: its last line may be cut short
                continue
            fail(2, f"{path}:{number}: not a JSON line ({e.msg})")
        kind = record.get("kind")
        if kind in by_kind and isinstance(record.get("step"), (int, float)):
            by_kind[kind][record["step"]] = record
    return by_kind


def series(records, field):
    steps = sorted(s for s, r in records.items() if isinstance(r.get(field), (int, float)))
    return steps, [records[s][field] for s in steps]


def labels_for(run_dirs):
    """Each run's folder name, or its path where two runs share a name."""
    names = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
    return [d if names.count(n) > 1 else n for d, n in zip(run_dirs, names)]


def main():
    parser = argparse.ArgumentParser(
        prog="plot_metrics.py",
        description="Draw loss, accuracy, learning rate and images/s against steps from metrics.jsonl.")
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a cudagrad-train output.dir")
    parser.add_argument("-o", "--output", metavar="FILE.png", help="default: RUN_DIR/curves.png (the first run's)")
    args = parser.parse_args()
    output = args.output or os.path.join(args.runs[0], "curves.png")
    if not output.endswith(".png"):
        fail(2, f"the output must be a .png file, got {output}")
    runs = [(label, read_run(d)) for label, d in zip(labels_for(args.runs), args.runs)]
    if not any(r["train"] or r["eval"] for _, r in runs):
        fail(1, "no train or eval records in " + ", ".join(os.path.join(d, "metrics.jsonl") for d in args.runs))

    import matplotlib
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), constrained_layout=True)
    panels = [(axes[0][0], "loss", "loss", True), (axes[0][1], "accuracy", "accuracy", True),
              (axes[1][0], "lr", "learning rate", False), (axes[1][1], "images_per_s", "training images/s", False)]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, records) in enumerate(runs):
        color = colors[i % len(colors)]
        for ax, field, title, with_eval in panels:
            steps, values = series(records["train"], field)
            if steps:
                ax.plot(steps, values, color=color, label=f"{label} train" if with_eval else label)
            if with_eval:
                steps, values = series(records["eval"], field)
                if steps:
                    ax.plot(steps, values, color=color, linestyle="--", marker="o", label=f"{label} eval (test set)")
    for ax, field, title, _ in panels:
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
    if runs and len(runs) == 1:
        fig.suptitle(f"cudagrad-train: {runs[0][0]}")
    else:
        fig.suptitle("cudagrad-train: " + ", ".join(label for label, _ in runs))
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    fig.savefig(output, dpi=100)
    print(f"curves: {output}")


if __name__ == "__main__":
    main()
