#!/usr/bin/env python3
"""PyTorch's CPU conv2d (f32) at one shape, for bp-bench's suite `conv`.

Usage: torch_conv.py N C O HW K STRIDE PAD --threads T [--reps R | --serve]
Prints one line per repetition, `seconds <s>`, after one warm-up call, then
`gflops <median GFLOP/s>` (2 * N * O * Hout * Wout * C * K * K flops, as
bp-bench counts). With --serve it prints `ready` after the warm-up and then
times one call per `run` line read from stdin (`seconds <s>` each) until
end of input: bp-bench (suite conv) drives it between its own repetitions,
so that both see the same load. Needs Debian's python3-torch
(scripts/setup-debian.sh --bench), never the tests. Exit status 2 when
torch cannot be imported.
"""
import argparse
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    for name in ("n", "c", "o", "hw", "k", "stride", "pad"):
        ap.add_argument(name, type=int)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_conv: cannot import torch: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.randn(a.n, a.c, a.hw, a.hw)
    w = torch.randn(a.o, a.c, a.k, a.k)
    ho = (a.hw + 2 * a.pad - a.k) // a.stride + 1
    flops = 2.0 * a.n * a.o * ho * ho * a.c * a.k * a.k
    times = []
    with torch.no_grad():
        torch.nn.functional.conv2d(x, w, None, a.stride, a.pad)  # warm-up
        if a.serve:
            print("ready", flush=True)
            for line in sys.stdin:
                if line.strip() != "run":
                    continue
                t0 = time.perf_counter()
                torch.nn.functional.conv2d(x, w, None, a.stride, a.pad)
                print(f"seconds {time.perf_counter() - t0:.9f}", flush=True)
            return 0
        for _ in range(a.reps):
            t0 = time.perf_counter()
            torch.nn.functional.conv2d(x, w, None, a.stride, a.pad)
            times.append(time.perf_counter() - t0)
            print(f"seconds {times[-1]:.9f}", flush=True)
    print(f"gflops {flops / statistics.median(times) / 1e9:.3f}")
    print(f"torch {torch.__version__} threads {torch.get_num_threads()} "
          f"mkldnn {torch.backends.mkldnn.is_available()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
