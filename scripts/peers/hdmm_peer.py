"""Run HDMM (dpcomp-org/hdmm, unmodified) on the issue-32 workloads with
Laplace noise at eps = 1: the expected total squared error of the workload's
queries, hdmm.error.expected_error(W, A, eps=1) (2 Δ1(A)² tr(WᵀW (AᵀA)⁺)),
best of 10 restarts (seeds 0-9).

  - marginal workloads on the arrests schema: OPT_M (templates.Marginals);
  - prefix sums and all ranges of a 50-value ordered attribute: OPT_0
    (templates.OPT0: the best of identity, total, p-identity with
    p = n/16 and identity + weighted total).

Usage: /usr/bin/python3 scripts/peers/hdmm_peer.py PATH/TO/hdmm [ROW...]
"""
import os
import sys

import numpy as np

import workloads

RESTARTS = 10


def best(make, W):
    from hdmm import error
    errs = []
    for seed in range(RESTARTS):
        np.random.seed(seed)
        t = make(seed)
        t.optimize(W)
        errs.append(error.expected_error(W, t.strategy(), eps=1.0))
    return min(errs), errs


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    src = os.path.join(sys.argv[1], "src")
    if not os.path.exists(os.path.join(src, "hdmm", "templates.py")):
        sys.exit("no src/hdmm/templates.py under %s" % sys.argv[1])
    sys.path.insert(0, src)
    from hdmm import templates, workload

    rows = sys.argv[2:]
    _, sizes = workloads.arrests()
    for name, marginals in workloads.marginal_workloads().items():
        if rows and name not in rows:
            continue
        W = workload.Marginals.fromtuples(sizes, {m: 1.0 for m in marginals})
        b, errs = best(lambda s: templates.Marginals(sizes, approx=False, seed=s), W)
        print("%-8s laplace eps=1 HDMM OPT_M best of %d: %.4f (all: %s)" %
              (name, RESTARTS, b, " ".join("%.1f" % e for e in errs)))
    for name, W in (("prefix50", workload.Prefix(50)), ("ranges50", workload.AllRange(50))):
        if rows and name not in rows:
            continue
        b, errs = best(lambda s: opt0(templates, 50, s), W)
        print("%-8s laplace eps=1 HDMM OPT_0 best of %d: %.4f (all: %s)" %
              (name, RESTARTS, b, " ".join("%.2f" % e for e in errs)))


def opt0(templates, n, seed):
    # templates.OPT0(n) with the p-identity template seeded: OPT0 itself
    # draws its seed from numpy's global generator, seeded in best().
    return templates.OPT0(n)


if __name__ == "__main__":
    main()
