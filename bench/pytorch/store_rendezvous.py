"""PyTorch's side of bench/store_rendezvous_bench.cpp: the same rendezvous workload against
torch.distributed.TCPStore (libuv server where this PyTorch has it), rank 0 hosting the store in
this process and ranks 1..N-1 forked from it, blocked on a pipe until the store is up.

Per rank: connect a client, set gloo/<rank> (136 bytes per other rank), set binary/<rank>, get
binary/0, set config/<rank> (a few KB), get config/0, then the barrier as ours does it: add 1 to
the barrier key, the last arrival sets <key>/done, everybody gets <key>/done.

Usage: python store_rendezvous.py <ranks> [nofile_soft_limit] [config_bytes]
Prints one line in the format of the C++ benchmark.
"""
import datetime
import gc
import os
import resource
import sys
import threading
import time

import torch
import torch.distributed as dist

GLOO_ADDRESS_BYTES = 136
TIMEOUT = datetime.timedelta(seconds=60)


def payload(world, config_bytes):
    config = ""
    while len(config) < config_bytes:
        config += "model:\n  name: resnet18\n  width: 64\n"
    return b"a" * (GLOO_ADDRESS_BYTES * (world - 1)), "crc32 1badb002, 48211968 bytes", config[:config_bytes]


def rank_workload(store, rank, world, p):
    addresses, binary, config = p
    store.set(f"gloo/{rank}", addresses)
    store.set(f"binary/{rank}", binary)
    assert store.get("binary/0").decode() == binary
    store.set(f"config/{rank}", config)
    assert store.get("config/0").decode() == config
    key = "barrier/init/0"
    if store.add(key, 1) == world:
        store.set(key + "/done", "1")
    store.get(key + "/done")


def client(port):
    kwargs = dict(is_master=False, timeout=TIMEOUT, wait_for_workers=False)
    return dist.TCPStore("127.0.0.1", port, None, **kwargs)


def server(port, world):
    kwargs = dict(is_master=True, timeout=TIMEOUT, wait_for_workers=False)
    if "use_libuv" in dist.TCPStore.__init__.__doc__:
        kwargs["use_libuv"] = True
    return dist.TCPStore("127.0.0.1", port, None, **kwargs)


def run_child(go_r, port, rank, world, p):
    os.read(go_r, 1)  # the parent closing its end is the go
    try:
        rank_workload(client(port), rank, world, p)
    except Exception as e:  # noqa: BLE001 -- any failure counts, and says which rank
        sys.stderr.write(f"rank {rank} failed: {e}\n")
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return -1


class Sampler(threading.Thread):
    """The store process's peak descriptors and threads, sampled every 2 ms."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop, self.peak_fds, self.peak_threads = False, 0, 0

    def run(self):
        while not self.stop:
            self.peak_fds = max(self.peak_fds, len(os.listdir("/proc/self/fd")) - 1)
            self.peak_threads = max(self.peak_threads, status_kb("Threads:"))
            time.sleep(0.002)


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ranks(pids):
    failures = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        failures += not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0)
    return failures


def main():
    world = int(sys.argv[1])
    if len(sys.argv) > 2 and int(sys.argv[2]) > 0:
        resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    p = payload(world, int(sys.argv[3]) if len(sys.argv) > 3 else 4096)
    port = free_port()
    go_r, go_w = os.pipe()
    gc.freeze()  # the forked ranks then copy fewer of the parent's pages (the collector writes to them)
    pids = []
    for rank in range(1, world):  # before any thread starts
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            run_child(go_r, port, rank, world, p)
        pids.append(pid)
    os.close(go_r)
    rss_before = status_kb("VmRSS:")
    sampler = Sampler()
    sampler.start()
    t0 = time.monotonic()
    try:
        store = server(port, world)
        os.close(go_w)
        rank_workload(store, 0, world, p)
        failures = wait_ranks(pids)
    except Exception as e:  # noqa: BLE001
        sys.stderr.write(f"rank 0 failed: {e}\n")
        os.close(go_w)
        failures = 1 + wait_ranks(pids)
    seconds = time.monotonic() - t0
    sampler.stop = True
    sampler.join()
    ranks_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"pytorch-{torch.__version__} ranks={world} time_s={seconds:.3f} peak_fds={sampler.peak_fds} "
          f"peak_threads={sampler.peak_threads} rss_before_mb={rss_before / 1024:.1f} "
          f"vmhwm_mb={status_kb('VmHWM:') / 1024:.1f} failures={failures} "
          f"ranks_cpu_s={ranks_cpu.ru_utime + ranks_cpu.ru_stime:.2f} "
          f"nofile_soft_at_end={resource.getrlimit(resource.RLIMIT_NOFILE)[0]}", flush=True)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
