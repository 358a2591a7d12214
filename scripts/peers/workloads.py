"""The comparison workloads of issue 32, shared by the peer drivers.

The arrests schema (data/arrests.schema.json): year 6, colour 2, sex 2,
agegroup 5, employed 2, citizen 2, checks 7, released 2.
"""
import itertools
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "..", "..", "data", "arrests.schema.json")


def arrests():
    """Return the arrests schema's dimension names and sizes."""
    with open(SCHEMA) as f:
        dims = json.load(f)["dimensions"]
    return [d["name"] for d in dims], [len(d["values"]) for d in dims]


def marginal_workloads():
    """Return {row name: list of attribute-index tuples} on the arrests schema."""
    names, sizes = arrests()
    idx = {n: i for i, n in enumerate(names)}
    d = len(sizes)
    two = list(itertools.combinations(range(d), 2))
    three = list(itertools.combinations(range(d), 3))
    one = list(itertools.combinations(range(d), 1))
    mixed = [("year", "colour"), ("colour", "sex", "agegroup"), ("checks",),
             ("year", "checks", "released")]
    mixed = [tuple(sorted(idx[a] for a in m)) for m in mixed]
    return {
        "2way": two,
        "3way": three,
        "mixed4": mixed,
        "1+2way": one + two,
    }
