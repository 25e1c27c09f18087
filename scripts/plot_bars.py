#!/usr/bin/python3
"""A bar chart of a few measurements, for the comparison scripts (bench/cpu_compare.sh,
scripts/gpu_compare.sh) to put next to their tables.

Usage: scripts/plot_bars.py -o FILE.png --title TITLE --ylabel UNIT LABEL=VALUE [LABEL=VALUE ...]
Each bar is labelled with its value. Exit code 2 for bad arguments; 3 when matplotlib is missing
(the callers then go on without the chart).
"""
import argparse
import os
import sys


def main():
    parser = argparse.ArgumentParser(prog="plot_bars.py", description="Bar chart of LABEL=VALUE pairs.")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.png")
    parser.add_argument("--title", default="")
    parser.add_argument("--ylabel", default="")
    parser.add_argument("bars", nargs="+", metavar="LABEL=VALUE")
    args = parser.parse_args()
    labels, values = [], []
    for bar in args.bars:
        label, sep, value = bar.rpartition("=")
        try:
            values.append(float(value))
        except ValueError:
            sep = ""
        if not sep or not label:
            parser.error(f"'{bar}' is not LABEL=VALUE with a number for VALUE")
        labels.append(label)
    try:
        import matplotlib
    except ImportError:
        print("plot_bars: matplotlib is missing (apt-get install python3-matplotlib); no chart", file=sys.stderr)
        sys.exit(3)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(labels)), 4.5), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    bars = ax.bar(labels, values, color=[colors[i % len(colors)] for i in range(len(labels))])
    ax.bar_label(bars, labels=[f"{v:.4g}" for v in values])
    ax.set_title(args.title)
    ax.set_ylabel(args.ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    ax.tick_params(axis="x", labelrotation=15 if len(labels) > 3 else 0)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    fig.savefig(args.output, dpi=100)
    print(f"chart: {args.output}")


if __name__ == "__main__":
    main()
