"""Run ResidualPlanner (dkifer/ResidualPlanner, unmodified) on the issue-32
marginal workloads: the sum of the variances of every cell of every workload
marginal, Gaussian noise at rho-zCDP with rho = 1 (ResidualPlanner's pcost is
2 rho), unit weights.

Usage: /usr/bin/python3 scripts/peers/residualplanner.py PATH/TO/ResidualPlanner

The peer's class_resplan.py imports cvxpy at the top but uses it only for the
max-variance objective; Debian has no cvxpy, so a stand-in module that fails
if called is installed first. Nothing of the peer's code is changed.
"""
import os
import sys
import types

import workloads


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    root = os.path.join(sys.argv[1], "residual_planner")
    if not os.path.exists(os.path.join(root, "class_resplan.py")):
        sys.exit("no residual_planner/class_resplan.py under %s" % sys.argv[1])
    try:
        import cvxpy  # noqa: F401
    except ImportError:
        stub = types.ModuleType("cvxpy")

        def refuse(*a, **k):
            raise RuntimeError("cvxpy is not installed: only sumvar runs")
        stub.Variable = stub.Problem = stub.Minimize = refuse
        sys.modules["cvxpy"] = stub
    sys.path.insert(0, root)
    from class_resplan import ResidualPlanner

    _, sizes = workloads.arrests()
    rho = 1.0
    for name, marginals in workloads.marginal_workloads().items():
        system = ResidualPlanner(sizes)
        for att in marginals:
            system.input_mech(att)
        obj = system.selection(choice="sumvar", pcost=2 * rho)
        print("%-8s gaussian rho=1 sumvar ResidualPlanner %.6f" % (name, obj))


if __name__ == "__main__":
    main()
