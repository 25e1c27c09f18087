"""The analysis of bench/long_run_memory.sh: each rank's resident memory after the first epoch,
at the end and its growth between (against a stated bound), the checkpoints the long and the
short run share compared tensor by tensor, a chart of the samples, and with --save the table and
the chart under the given prefix (.md, .png). Exit 1 when the growth exceeds the bound or a
shared checkpoint differs.
"""
import argparse
import json
import struct
import sys
from pathlib import Path


def read_samples(path):
    """(seconds, rss0 MiB, rss1 MiB, checkpoints so far) per sample line."""
    rows = []
    for line in Path(path).read_text().splitlines():
        t, r0, r1, ckpts = (int(v) for v in line.split())
        rows.append((t, r0 / 1024, r1 / 1024, ckpts))
    if not rows:
        sys.exit("long_run_memory: no memory samples (did the ranks start?)")
    return rows


def tensors(path):
    """name -> raw bytes of every tensor of a safetensors file (its metadata left aside)."""
    data = Path(path).read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    body = data[8 + header_len :]
    return {
        name: body[entry["data_offsets"][0] : entry["data_offsets"][1]]
        for name, entry in header.items()
        if name != "__metadata__"
    }


def checkpoint_of(run_dir, epoch, epochs):
    """A run's checkpoint after `epoch` of its `epochs`: the last one is saved as last.safetensors."""
    return run_dir / "checkpoints" / ("last.safetensors" if epoch == epochs else f"epoch_{epoch}.safetensors")


def compare_checkpoints(out, short_epochs, epochs):
    """One line per shared epoch; True when every tensor of every one is bit-identical."""
    lines, same = [], True
    for epoch in range(1, short_epochs + 1):
        name = f"epoch {epoch}"
        a = tensors(checkpoint_of(out / "long", epoch, epochs))
        b = tensors(checkpoint_of(out / "short", epoch, short_epochs))
        differing = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        same &= not differing
        lines.append(
            f"| {name} | {len(a)} tensors | "
            + ("bit-identical" if not differing else f"{len(differing)} differ: {', '.join(differing[:5])}")
            + " |"
        )
    return lines, same


def growth_table(rows, bound_mib):
    """Markdown lines per rank and whether every rank stayed within the bound."""
    after_first = next((r for r in rows if r[3] >= 1), None)
    if after_first is None:
        sys.exit("long_run_memory: no sample after the first epoch's checkpoint")
    later = [r for r in rows if r[0] >= after_first[0]]
    lines, ok = [], True
    for rank in (0, 1):
        start, end = after_first[1 + rank], later[-1][1 + rank]
        peak = max(r[1 + rank] for r in later)
        grew = peak - start
        ok &= grew <= bound_mib
        lines.append(f"| rank {rank} | {start:.1f} | {end:.1f} | {peak:.1f} | {grew:+.1f} | {bound_mib} |")
    return lines, ok, after_first[0]


def draw(rows, first_epoch_s, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r[0] / 60 for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    for rank in (0, 1):
        ax.plot(t, [r[1 + rank] for r in rows], label=f"rank {rank}")
    ax.axvline(first_epoch_s / 60, color="gray", linestyle=":", label="first epoch done")
    ax.set_xlabel("minutes")
    ax.set_ylabel("resident memory (MiB)")
    ax.set_title("cudagrad, 2 ranks on the CPU: resident memory over a long run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--short-epochs", type=int, required=True)
    ap.add_argument("--bound-mib", type=float, required=True)
    ap.add_argument("--interval", type=int, required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--save", help="prefix of the .md and .png to write (else under OUT)")
    a = ap.parse_args()
    rows = read_samples(a.out / "rss.txt")
    memory, within, first_epoch_s = growth_table(rows, a.bound_mib)
    checkpoints, same = compare_checkpoints(a.out, a.short_epochs, a.epochs)
    minutes = rows[-1][0] / 60
    md = [
        f"# Long run: resident memory of 2 CPU ranks over {minutes:.1f} minutes",
        "",
        a.machine,
        "",
        f"`bench/long_run_memory.sh`: configs/fashion_mnist_cpu.yaml, constant learning rate, 1 thread per rank,"
        f" a checkpoint every epoch; VmRSS every {a.interval} s ({len(rows)} samples); the first epoch ended at"
        f" {first_epoch_s} s.",
        "",
        "| rank | MiB after epoch 1 | MiB at the end | peak MiB after epoch 1 | growth | bound |",
        "| --- | --- | --- | --- | --- | --- |",
        *memory,
        "",
        f"Checkpoints shared with a {a.short_epochs}-epoch run from the same seed:",
        "",
        "| after | tensors | long vs short |",
        "| --- | --- | --- |",
        *checkpoints,
    ]
    prefix = Path(a.save) if a.save else a.out / "memory"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    prefix.with_suffix(".md").write_text("\n".join(md) + "\n")
    draw(rows, first_epoch_s, prefix.with_suffix(".png"))
    print("\n".join(md))
    print(f"\nlong_run_memory: wrote {prefix.with_suffix('.md')} and {prefix.with_suffix('.png')}")
    if not within:
        print(f"long_run_memory: memory grew by more than {a.bound_mib} MiB after the first epoch", file=sys.stderr)
    if not same:
        print("long_run_memory: a checkpoint the two runs share differs", file=sys.stderr)
    sys.exit(0 if within and same else 1)


if __name__ == "__main__":
    main()
