"""Score knowdp's Laplace marginal strategies with HDMM's own error function
(dpcomp-org/hdmm, unmodified): an independent check of knowdp's objective.

Reads the "hdmm-score ROW [DIMS] SHARE OBJECTIVE" lines that
`go test ./strategy -run TestPeerComparison -v` prints, rebuilds each
strategy as HDMM's weighted marginals (weights = shares of epsilon, so
HDMM's sensitivity is their sum, 1) and prints HDMM's expected error at
eps = 1 next to knowdp's.

Usage: go test ./strategy -run TestPeerComparison -v |
       /usr/bin/python3 scripts/peers/hdmm_score.py PATH/TO/hdmm
"""
import collections
import os
import re
import sys

import workloads


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, os.path.join(sys.argv[1], "src"))
    from hdmm import error, workload

    strategies = collections.OrderedDict()
    knowdp = {}
    pat = re.compile(r"hdmm-score (\S+) \[([0-9,]*)\] (\S+) (\S+)")
    for line in sys.stdin:
        m = pat.search(line)
        if not m:
            continue
        row, dims, share, obj = m.groups()
        dims = tuple(int(d) for d in dims.split(",")) if dims else ()
        strategies.setdefault(row, {})[dims] = float(share)
        knowdp[row] = float(obj)
    if not strategies:
        sys.exit("no hdmm-score lines on standard input")
    _, sizes = workloads.arrests()
    rows = workloads.marginal_workloads()
    for row, shares in strategies.items():
        W = workload.Marginals.fromtuples(sizes, {m: 1.0 for m in rows[row]})
        A = workload.Marginals.fromtuples(sizes, shares)
        e = error.expected_error(W, A, eps=1.0)
        print("%-8s %d marginals, sensitivity %.12f: HDMM's error %.6f, knowdp's objective %.6f, relative difference %.1e" %
              (row, len(shares), A.sensitivity(), e, knowdp[row], abs(e - knowdp[row]) / e))


if __name__ == "__main__":
    main()
