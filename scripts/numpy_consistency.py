#!/usr/bin/env python3
"""The numpy peer of cube's consistency benchmark (BenchmarkConsistent).

A plain numpy sweep over a dense cube of 8 dimensions of 10 values (10^8
cells), one projection per exact cuboid as in paper 3's eqs. 6-7: sum over the
dimensions outside the cuboid, subtract from the target, divide by the degree,
broadcast-add. The exact cuboids are those of cube/bench_test.go. Prints one
line per number of exact cuboids: best of --repeat runs, in seconds.

Run by scripts/bench.sh when numpy is importable; not part of the test suite.
"""
import argparse
import sys
import time

import numpy as np

EXACT = {
    1: [(0, 1, 2)],
    2: [(0, 1, 2), (2, 3)],
    4: [(0, 1, 2), (2, 3), (0, 4), (5,)],
}


def sweep(x, targets):
    for keep, target in targets:
        drop = tuple(i for i in range(x.ndim) if i not in keep)
        deg = np.prod([x.shape[i] for i in drop])
        corr = (target - x.sum(axis=drop, keepdims=True)) / deg
        x += corr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    x = rng.integers(0, 4, size=(10,) * args.dims).astype(np.float64)
    for k in (1, 2, 4):
        targets = []
        for keep in EXACT[k]:
            drop = tuple(i for i in range(args.dims) if i not in keep)
            targets.append((keep, x.sum(axis=drop, keepdims=True)))
        best = float("inf")
        for _ in range(args.repeat):
            y = x.copy()
            t0 = time.perf_counter()
            sweep(y, targets)
            best = min(best, time.perf_counter() - t0)
        print(f"numpy consistency cells=1e{args.dims} exact={k}: {best:.3f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
