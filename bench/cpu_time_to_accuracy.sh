#!/usr/bin/env bash
# Time to 92% Fashion-MNIST test accuracy on the CPU, cudagrad against PyTorch at its best, side by
# side: cudagrad-train with configs/fashion_mnist_cpu.yaml (scripts/train.sh's config) and
# bench/pytorch/time_to_accuracy.py reading the same file (the same network, batch, epochs, SGD,
# schedule, normalization, no augmentation, last partial batch dropped), with the same thread
# count, one after the other: cudagrad, then PyTorch in each of its variants (eager NCHW, eager
# channels-last, torch.compile NCHW, torch.compile channels-last), then cudagrad again in the next
# round. PyTorch is bench/pytorch/venv.sh's venv when it is there, plus Debian's 1.13 (eager) as a
# second row where installed; PYTHON=... runs that interpreter alone. All evaluate after every
# epoch and stop at the first evaluation at or above the target. Each side's time counts from its
# process start (its own clock; a compiled variant's compilation, done before its first epoch, is
# taken out and shown apart) and is also taken from outside here, with the CPU time. Prints a table
# (epoch accuracies, time to target or "not reached", compile time, training images/s, the ratios
# against the fastest PyTorch, the machine and the versions); --save writes it to
# bench/results/cpu_time_to_accuracy_<date>_<HHMM>_<N>t.md (UTC). Logs and the run go to --out.
# Exits 2 on a bad command line, 1 (saying why) when the build, PyTorch or the data is missing, a
# side fails, the two sides built networks of different sizes, or PyTorch's variants disagree on
# the first step's loss.
# Usage: bench/cpu_time_to_accuracy.sh [BUILD_DIR] [--threads N] [--target T] [--data DIR]
#        [--out DIR] [--rounds R] [--variants LIST] [--smoke] [--save]
#   --threads N   cudagrad's train.threads and torch.set_num_threads (default: all cores, nproc)
#   --target T    test accuracy to reach, in (0, 1] (default 0.92)
#   --data DIR    the Fashion-MNIST folder (default /usr/share/datasets/fashion-mnist)
#   --out DIR     logs, metrics and the run's files (default cpu_tta_out)
#   --rounds R    run the pair R times, alternating (default 1): a row per engine and round, and
#                 the median of the rounds' ratios (a shared machine's load drifts over minutes)
#   --variants L  PyTorch's variants (default eager,channels-last,compile,compile-channels-last)
#   --smoke       a check that the comparison runs, not a measurement: the first 1024 training and
#                 512 test images (copied to the --out folder's smoke_data/), 2 epochs on both sides
#   --save        also write the table to bench/results/ (not with --smoke)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=cpu_time_to_accuracy
# shellcheck source=bench/compare_common.sh
source "$ROOT/bench/compare_common.sh"

CONFIG="$ROOT/configs/fashion_mnist_cpu.yaml"
BUILD=build THREADS=$(nproc) TARGET=0.92 DATA=/usr/share/datasets/fashion-mnist OUT=cpu_tta_out ROUNDS=1 SMOKE=0 SAVE=0
VARIANTS=$ALL_VARIANTS
while (($#)); do
  case "$1" in
    --build|--threads|--target|--data|--out|--rounds|--variants)
      (($# >= 2)) || usage_die "$1 needs a value"
      case "$1" in
        --build) BUILD=$2 ;; --threads) THREADS=$2 ;; --target) TARGET=$2 ;; --data) DATA=$2 ;; --out) OUT=$2 ;;
        --rounds) ROUNDS=$2 ;; --variants) VARIANTS=$2 ;;
      esac
      shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    --save) SAVE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; usage_die "unknown option $1" ;;
    *) BUILD=$1; shift ;;
  esac
done
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || usage_die "--threads must be a positive whole number, got '$THREADS'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || usage_die "--rounds must be a positive whole number, got '$ROUNDS'"
[[ $TARGET =~ ^(0?\.[0-9]*[1-9][0-9]*|1(\.0*)?)$ ]] || usage_die "--target must be in (0, 1], e.g. 0.92, got '$TARGET'"
((SMOKE && SAVE)) && usage_die "--save keeps measurements; a --smoke run is not one"
[[ -n $OUT ]] || usage_die "--out needs a folder"
check_variants "$VARIANTS"

BUILD=$(resolve_build "$BUILD")
BIN="$BUILD/apps/cudagrad-train"
require_binary "$BIN" cudagrad-train
require_torch
[[ -f $CONFIG ]] || die "$CONFIG is missing"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [[ -f $DATA/$f.gz || -f $DATA/$f ]] \
    || die "$DATA has no ${f}[.gz]: install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data DIR"
done
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)

ours_extra=() theirs_extra=() subset=""
if ((SMOKE)); then
  # The same reader on both sides, on fewer images: IDX files holding the first N of each split.
  "$TOOL_PYTHON" - "$DATA" "$OUT/smoke_data" <<'PY' || die "could not write the smoke-test subset of $DATA"
import gzip, os, struct, sys
source, dest = sys.argv[1:3]
os.makedirs(dest, exist_ok=True)
for split, count in (("train", 1024), ("t10k", 512)):
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        name = f"{split}-{kind}"
        path = os.path.join(source, name + ".gz")
        data = gzip.open(path).read() if os.path.exists(path) else open(os.path.join(source, name), "rb").read()
        dims = data[3]
        shape = list(struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims]))
        item = 1
        for d in shape[1:]:
            item *= d
        shape[0] = min(count, shape[0])
        with open(os.path.join(dest, name), "wb") as f:
            f.write(data[:4] + struct.pack(">" + "I" * dims, *shape))
            f.write(data[4 + 4 * dims:4 + 4 * dims + shape[0] * item])
PY
  DATA="$OUT/smoke_data" subset=" SMOKE TEST, not a measurement: 1024 training and 512 test images."
  ours_extra=(train.epochs=2) theirs_extra=(--epochs 2)
fi

# run_timed NAME LOG COMMAND...: runs one side with its output shown (indented) and kept in LOG;
# leaves "wall user system" seconds, as seen from here, in LOG.time. Stops the script if it fails.
run_timed() {
  local name=$1 log=$2 rc
  shift 2
  echo "== $name: $*"
  local TIMEFORMAT='%R %U %S'
  { time { "$@" 2>&1 | tee "$log" | sed -u 's/^/   /'; }; } 2> "$log.time"
  rc=$?
  ((rc == 0)) || die "$name failed (exit $rc); its output is above and in $log"
}

# Each interpreter's variants, worked out once: "PYTHON VARIANT" a line.
runs=()
for py in "${TORCH_PYTHONS[@]}"; do
  while read -r v; do runs+=("$py $v"); done < <(torch_variants "$py" "$VARIANTS")
done
((${#runs[@]})) || die "no PyTorch variant to run (--variants $VARIANTS)"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Round 1 writes cudagrad_run/, cudagrad.log and pytorch_<n>_<variant>.log (n: the interpreter's
# place in the list); round k > 1 the same names with _r<k>. pytorch_runs.tsv lists them (round,
# log), in the order they ran.
: > "$OUT/pytorch_runs.tsv"
for ((round = 1; round <= ROUNDS; ++round)); do
  tag=""
  ((round > 1)) && tag="_r$round"
  ((ROUNDS > 1)) && echo "== round $round of $ROUNDS"
  rm -rf "$OUT/cudagrad_run$tag"
  # checkpoint.save_every=0: no checkpoint between epochs (PyTorch's side writes none); the run
  # still writes last.safetensors at the end, after the clock has stopped.
  run_timed cudagrad "$OUT/cudagrad$tag.log" "$BIN" --config "$CONFIG" data.path="$DATA" train.threads="$THREADS" \
    train.target_accuracy="$TARGET" checkpoint.save_every=0 output.dir="$OUT/cudagrad_run$tag" "${ours_extra[@]}"
  for r in "${runs[@]}"; do
    py=${r%% *} variant=${r#* } n=0
    while [[ ${TORCH_PYTHONS[n]} != "$py" ]]; do ((++n)); done
    log="$OUT/pytorch_${n}_$variant$tag.log"
    run_timed "pytorch $variant" "$log" "$py" "$ROOT/bench/pytorch/time_to_accuracy.py" --config "$CONFIG" \
      --device cpu --data "$DATA" --target "$TARGET" --threads "$THREADS" --variant "$variant" "${theirs_extra[@]}"
    printf '%s\t%s\n' "$round" "$log" >> "$OUT/pytorch_runs.tsv"
  done
done

machine=$(machine_line "$load_before" "$BIN")
table=$("$TOOL_PYTHON" - "$OUT" "$TARGET" "$THREADS" "$machine" "$subset" "$ROUNDS" <<'PY'
import json, re, statistics, sys
out, target, threads, machine, subset = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
rounds = int(sys.argv[6])

def fail(why):
    sys.exit(f"cpu_time_to_accuracy: error: {why}")

def outside(log):  # wall, user, system seconds of the whole process
    try:
        wall, user, system = (float(v) for v in open(log + ".time").read().split()[-3:])
        return wall, user + system
    except (OSError, ValueError):
        fail(f"no timing in {log}.time")

def ours_round(tag):
    """cudagrad's side of one round: metrics.jsonl (train windows, evaluations, target_reached)."""
    run = f"{out}/cudagrad_run{tag}"
    try:
        records = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if l.strip()]
    except (OSError, ValueError) as e:
        fail(f"cannot read cudagrad's metrics ({e})")
    cfg = open(f"{run}/config.yaml").read()
    batch = int(re.search(r"^  batch_size: (\d+)", cfg, re.M).group(1))
    images = seconds = 0.0
    previous_step = 0
    for r in records:  # a window of (step - previous step) batches at images_per_s
        if r.get("kind") == "train":
            n = (r["step"] - previous_step) * batch
            images, seconds, previous_step = images + n, seconds + n / r["images_per_s"], r["step"]
    reached = next((r for r in records if r.get("event") == "target_reached"), None)
    found = re.search(r"model: MiniResNet .* (\d+) parameters", open(f"{out}/cudagrad{tag}.log").read())
    return {"evals": [r["accuracy"] for r in records if r.get("kind") == "eval"],
            "reached": reached["seconds_since_start"] if reached else None,
            "images_per_s": images / seconds if seconds else 0.0, "outside": outside(f"{out}/cudagrad{tag}.log"),
            "parameters": int(found.group(1)) if found else None, "cfg": cfg, "batch": batch}


def theirs_round(log):
    lines = [l for l in open(log) if l.startswith("{")]
    if not lines:
        fail(f"PyTorch's side printed no JSON result line (see {log})")
    t = json.loads(lines[-1])
    return {"evals": [e["accuracy"] for e in t["evals"]], "reached": t["seconds"] if t["reached"] else None,
            "images_per_s": t["images_per_s"], "outside": outside(log), "json": t,
            "name": f"PyTorch {t['torch']} {LABELS[t['variant']]}"}


LABELS = {"eager": "eager NCHW", "channels-last": "eager channels-last", "compile": "compile NCHW",
          "compile-channels-last": "compile channels-last"}
theirs_logs = {}
for line in open(f"{out}/pytorch_runs.tsv"):
    k, log = line.rstrip("\n").split("\t")
    theirs_logs.setdefault(int(k), []).append(log)
rounds_data = []  # per round: (cudagrad, [PyTorch variants])
for k in range(1, rounds + 1):
    tag = f"_r{k}" if k > 1 else ""
    ours, theirs = ours_round(tag), [theirs_round(log) for log in theirs_logs[k]]
    if not ours["evals"]:
        fail("cudagrad evaluated nothing (see the logs in " + out + ")")
    for side in theirs:
        t = side["json"]
        if ours["parameters"] != t["parameters"]:
            fail(f"the two networks differ: cudagrad has {ours['parameters']} parameters, {side['name']} {t['parameters']}")
        if t["threads"] != threads:
            fail(f"{side['name']} ran {t['threads']} threads, cudagrad {threads}")
        if not side["evals"]:
            fail(f"{side['name']} evaluated nothing (see the logs in {out})")
        # Same seed, same first batch: every variant of one torch must start from the same loss.
        ref = next(s["json"] for s in theirs if s["json"]["torch"] == t["torch"])
        if abs(t["loss0"] - ref["loss0"]) > 1e-4 * abs(ref["loss0"]):
            fail(f"{side['name']}: first loss {t['loss0']}, {ref['variant']} gave {ref['loss0']}: not the same model")
    rounds_data.append((ours, theirs))

names = [s["name"] for s in rounds_data[0][1]]
def sides(name):
    return [next(s for s in theirs if s["name"] == name) for _, theirs in rounds_data]
# The fastest PyTorch: the least median time to the target among the variants that reach it in
# every round; when none does, the most training images/s.
reaching = [n for n in names if all(s["reached"] is not None for s in sides(n))]
if reaching:
    best = min(reaching, key=lambda n: statistics.median(s["reached"] for s in sides(n)))
else:
    best = max(names, key=lambda n: statistics.median(s["images_per_s"] for s in sides(n)))

first, t = rounds_data[0][0], rounds_data[0][1][0]["json"]
widths = re.search(r"^  widths: (.*)$", first["cfg"], re.M).group(1).strip()
epochs_cfg = int(re.search(r"^  epochs: (\d+)", first["cfg"], re.M).group(1))
pct = f"{100 * target:g}%"
print(f"Time to {pct} Fashion-MNIST test accuracy on the CPU, configs/fashion_mnist_cpu.yaml: MiniResNet "
      f"{widths} ({t['parameters']:,} parameters), batch {first['batch']}, {epochs_cfg} epochs, SGD nesterov, "
      f"warmup_cosine, no augmentation; {threads} threads each"
      f"{f', {rounds} rounds, the sides alternating' if rounds > 1 else ''}.{subset}")
print(machine)
print()
print(f"| engine | test accuracy after each epoch | time to {pct} from process start, compile excluded (s) | "
      f"compile (s) | whole process, outside (s) | CPU time, outside (s) | training images/s |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for k, (ours, theirs) in enumerate(rounds_data, 1):
    suffix = f", round {k}" if rounds > 1 else ""
    for side in [dict(ours, name="cudagrad")] + theirs:
        accs = ", ".join(f"{100 * a:.2f}%" for a in side["evals"])
        when = f"{side['reached']:.1f}" if side["reached"] is not None else "not reached"
        compile_s = side.get("json", {}).get("compile_seconds") or 0
        mark = " (fastest PyTorch)" if side["name"] == best else ""
        print(f"| {side['name']}{mark}{suffix} | {accs} | {when} | {f'{compile_s:.1f}' if compile_s else '-'} | "
              f"{side['outside'][0]:.1f} | {side['outside'][1]:.1f} | {side['images_per_s']:.1f} |")
print()
pairs = list(zip([o for o, _ in rounds_data], sides(best)))
time_ratios = [th["reached"] / o["reached"] for o, th in pairs if o["reached"] is not None and th["reached"] is not None]
speed_ratios = [o["images_per_s"] / th["images_per_s"] for o, th in pairs]
each = lambda ratios: f" (median of the rounds' {', '.join(f'{r:.2f}x' for r in ratios)})" if rounds > 1 else ""
if len(time_ratios) == rounds:
    print(f"time to {pct}, PyTorch / cudagrad: {statistics.median(time_ratios):.2f}x{each(time_ratios)} "
          f"(the fastest PyTorch: {best}; above 1: cudagrad is faster)")
else:
    missing = sorted({n for o, th in pairs for n, s in (("cudagrad", o), ("PyTorch", th)) if s["reached"] is None})
    print(f"time to {pct}: not compared, {' and '.join(missing)} did not reach it"
          f"{' in every round' if rounds > 1 else ''}")
print(f"training images/s, cudagrad / PyTorch: {statistics.median(speed_ratios):.2f}x{each(speed_ratios)} "
      f"(against {best})")
PY
) || exit 1
echo
echo "$table"
if ((SAVE)); then
  mkdir -p "$ROOT/bench/results"
  saved="$(result_stem cpu_time_to_accuracy "_${THREADS}t").md"  # the time too: never overwrites
  echo "$table" > "$saved" || die "cannot write $saved"
  echo "saved $saved"
fi
