"""knowdp.release against a real knowdp binary, on the bundled data."""

from __future__ import annotations

import csv
import json
import os
import tempfile
import unittest
import warnings
from pathlib import Path

import knowdp

from . import _support as s

ARRESTS = s.DATA / "arrests.csv"
ARRESTS_SCHEMA = s.DATA / "arrests.schema.json"
PERSONS = s.DATA / "us-persons.csv"
GEO_SCHEMA = s.DATA / "us-geo.schema.json"

BIN = ""


def setUpModule() -> None:
    global BIN
    BIN = s.binary()


def seeded(**kw):
    """A seeded release, checking that it warns it is not private."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        r = knowdp.release(binary=BIN, **kw)
    msgs = [str(w.message) for w in got if issubclass(w.category, knowdp.NotPrivateWarning)]
    assert msgs and "NOT differentially private" in msgs[0], f"no NotPrivateWarning for a seeded release: {got}"
    assert r.metadata["private"] is False and r.metadata["seeded"] is True
    assert not r.private
    return r


def name_of(r: knowdp.Release, cuboid) -> str:
    """The table name the release's own metadata gives a cuboid."""
    for name, dims in r.cuboids.items():
        if sorted(dims) == sorted(cuboid):
            return name
    raise AssertionError(f"no table {cuboid} in {r.cuboids}")


class ReleaseTest(unittest.TestCase):
    def test_one_cuboid_keeps_its_invariant(self) -> None:
        r = seeded(data=str(ARRESTS), schema=str(ARRESTS_SCHEMA), cuboids=[["year", "colour", "released"]],
                   exact=[["year", "colour"]], epsilon=1, integer=False, seed=11, as_frames=False)
        self.assertEqual(len(r.tables), 1)
        self.assertEqual(r.metadata["tables"][0]["cuboid"], ["year", "colour", "released"])
        self.assertEqual(r.metadata["exact"], [["year", "colour"]])
        self.assertEqual(r.metadata["measurements"][0]["sensitivity"], 2)  # Lemma 4.2(i): one exact cuboid
        self.assertIsNone(r.files)
        t = r.table()
        self.assertIs(t, r.table("released", "year", "colour"))
        self.assertEqual(len(t), 6 * 2 * 2)
        self.assertEqual(s.columns(t)[:3], ["year", "colour", "released"])
        self.assertTrue(all(isinstance(row["year"], str) for row in t))  # domain values stay text
        truth = s.true_counts(ARRESTS, ["year", "colour"])
        got = s.sums(t, [0, 1], 3)
        self.assertEqual(set(got), set(truth))
        for k, v in truth.items():
            self.assertAlmostEqual(got[k], v, delta=1e-6, msg=f"invariant {k}")

    def test_several_cuboids_as_integers(self) -> None:
        r = seeded(data=ARRESTS, schema=ARRESTS_SCHEMA, exact=[["year"], ["colour", "sex"]],
                   cuboids=[["year", "colour"], ["sex", "agegroup"], []], epsilon=1, seed=5)
        files = [os.path.splitext(t["file"])[0] for t in r.metadata["tables"]]
        self.assertEqual(sorted(r.tables), sorted(files))
        self.assertEqual(r.metadata["epsilon_budget"], 1)
        yc, sa, total = (r.table(c) for c in (["year", "colour"], ["sex", "agegroup"], []))
        for t in (yc, sa, total):
            counts = [row[s.columns(t)[len(s.columns(t)) - 2]] for row in s.records(t)]
            self.assertTrue(all(isinstance(c, int) and c >= 0 for c in counts), counts)
        # Every invariant holds exactly in the integer tables.
        self.assertEqual(dict(s.sums(yc, [0], 2)), {k: v for k, v in s.true_counts(ARRESTS, ["year"]).items()})
        self.assertEqual(dict(s.sums(sa, [0], 2)), dict(s.true_counts(ARRESTS, ["sex"])))
        self.assertEqual(s.sums(total, [], 0)[()], sum(s.true_counts(ARRESTS, ["year"]).values()))

    def test_levels_of_a_hierarchy_add_up(self) -> None:
        with open(GEO_SCHEMA, encoding="utf-8") as f:
            geo = next(d for d in json.load(f)["dimensions"] if d["name"] == "geo")
        parents = geo["parents"]
        to_state = parents["state"]  # place -> state
        to_division = {p: parents["division"][st] for p, st in to_state.items()}
        to_region = {p: parents["region"][d] for p, d in to_division.items()}
        r = seeded(data=PERSONS, schema=GEO_SCHEMA, exact=[["geo:state"]], epsilon=1, seed=2,
                   cuboids=[[], ["geo:region"], ["geo:division", "sex"], ["geo:state", "sex"]])
        self.assertEqual([lv["level"] for lv in r.metadata["levels"]], ["total", "region", "division", "state"])
        state_sex = r.table("geo:state", "sex")
        division_sex = r.table(["sex", "geo:division"])
        region = r.table(["geo:region"])
        self.assertEqual(dict(s.sums(state_sex, [0], 2)), dict(s.true_counts(PERSONS, ["geo"], {"geo": to_state})))
        self.assertEqual(dict(s.sums(region, [0], 1)), dict(s.true_counts(PERSONS, ["geo"], {"geo": to_region})))
        # Each level adds up to the one above it, exactly.
        up = parents["division"]
        rolled = {}
        for row in s.records(state_sex):
            c = s.columns(state_sex)
            key = (up[row[c[0]]], row[c[1]])
            rolled[key] = rolled.get(key, 0) + row[c[2]]
        self.assertEqual(rolled, dict(s.sums(division_sex, [0, 1], 2)))

    def test_data_and_schema_in_memory(self) -> None:
        with open(ARRESTS, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        with open(ARRESTS_SCHEMA, encoding="utf-8") as f:
            schema = json.load(f)
        kw = dict(cuboids=[["sex", "agegroup"], ["year"]], exact=[["sex"]], epsilon=0.5, seed=7, as_frames=False)
        from_file = seeded(data=str(ARRESTS), schema=str(ARRESTS_SCHEMA), **kw)
        from_rows = seeded(data=rows, schema=schema, **kw)
        self.assertEqual(from_file.tables, from_rows.tables)

    def test_data_frame(self) -> None:
        kw = dict(schema=ARRESTS_SCHEMA, cuboids=[["year", "sex"]], epsilon=1, seed=3)
        if not s.frames_expected():
            self.assertIsInstance(seeded(data=ARRESTS, **kw).table(), list)
            with self.assertRaisesRegex(knowdp.KnowdpError, "needs pandas"):
                knowdp.release(binary=BIN, data=ARRESTS, as_frames=True, **kw)
            return
        import pandas as pd
        df = pd.read_csv(ARRESTS, dtype=str)
        r = seeded(data=df, **kw)
        t = r.table()
        self.assertIsInstance(t, pd.DataFrame)
        self.assertEqual(list(t.columns[:2]), ["year", "sex"])
        self.assertEqual(t[t.columns[0]].dtype, object)
        self.assertEqual(str(t[t.columns[2]].dtype), "int64")
        rows = seeded(data=ARRESTS, as_frames=False, **kw).table()
        self.assertEqual(t.to_dict("records"), rows)

    def test_rows_without_pandas(self) -> None:
        from unittest import mock
        with mock.patch.dict("sys.modules", {"pandas": None}):
            r = seeded(data=ARRESTS, schema=ARRESTS_SCHEMA, cuboids=[["sex"]], epsilon=1, seed=1)
            self.assertIsInstance(r.table(), list)
            self.assertEqual([row["sex"] for row in r.table()], ["Female", "Male"])
            with self.assertRaisesRegex(knowdp.KnowdpError, "python3-pandas"):
                knowdp.release(binary=BIN, data=ARRESTS, schema=ARRESTS_SCHEMA, epsilon=1, as_frames=True)

    def test_gaussian_is_private_and_says_so(self) -> None:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            r = knowdp.release(binary=BIN, data=ARRESTS, schema=ARRESTS_SCHEMA, cuboids=[["sex", "agegroup"]],
                               rho=0.5, integer=False, as_frames=False)
        self.assertEqual([w for w in got if issubclass(w.category, knowdp.NotPrivateWarning)], [])
        self.assertTrue(r.private)
        self.assertEqual(r.guarantee, "unconditional")
        self.assertEqual(r.metadata["rho"], 0.5)
        self.assertIn("sigma", r.metadata["measurements"][0])
        self.assertIn("rho=0.5", repr(r))
        self.assertEqual(len(r.table()), 2 * 5)

    def test_weights_make_a_workload(self) -> None:
        r = seeded(data=ARRESTS, schema=ARRESTS_SCHEMA, cuboids=[["year"], ["sex"]], weights=[1, 3],
                   epsilon=1, seed=4)
        self.assertEqual(sorted(t["weight"] for t in r.metadata["tables"]), [1, 3])

    def test_out_is_kept_and_never_overwritten(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "tables")
            r = seeded(data=ARRESTS, schema=ARRESTS_SCHEMA, cuboids=[["year"], ["sex"]], epsilon=1, seed=9, out=out)
            self.assertEqual(r.out, out)
            self.assertTrue(os.path.exists(os.path.join(out, "release.json")))
            for name, path in (r.files or {}).items():
                self.assertTrue(os.path.isfile(path), path)
            before = {p: Path(p).read_bytes() for p in (r.files or {}).values()}
            with self.assertRaises(knowdp.UsageError) as cm:
                knowdp.release(binary=BIN, data=ARRESTS, schema=ARRESTS_SCHEMA, cuboids=[["year"], ["sex"]],
                               epsilon=1, out=out)
            self.assertEqual(cm.exception.exit_code, 2)
            self.assertIn("exists", cm.exception.message)
            self.assertEqual(before, {p: Path(p).read_bytes() for p in before})

            one = os.path.join(d, "year.csv")
            r = seeded(data=ARRESTS, schema=ARRESTS_SCHEMA, cuboids=[["year"]], epsilon=1, seed=9, out=one)
            self.assertEqual(list(r.tables), ["year"])
            self.assertTrue(os.path.isfile(os.path.join(d, "year.json")))

    def test_errors_carry_the_commands_message(self) -> None:
        with self.assertRaises(knowdp.CLIError) as cm:
            knowdp.release(binary=BIN, data=ARRESTS, schema=ARRESTS_SCHEMA, cuboids=[["yeer"]], epsilon=1)
        e = cm.exception
        self.assertNotIsInstance(e, knowdp.UsageError)
        self.assertEqual(e.exit_code, 1)
        self.assertIn('unknown dimension "yeer"', e.message)
        self.assertIn("exit status 1", str(e))
        self.assertEqual(e.command[1], "release")

        with self.assertRaises(knowdp.UsageError) as cm:
            knowdp.release(binary=BIN, data=ARRESTS, schema=ARRESTS_SCHEMA, epsilon=0)
        self.assertEqual(cm.exception.exit_code, 2)
        self.assertIn("--epsilon", cm.exception.message)
        self.assertNotIn("Run 'knowdp help", cm.exception.message)

        with self.assertRaises(knowdp.CLIError) as cm:
            knowdp.release(binary=BIN, data="no-such-file.csv", schema=ARRESTS_SCHEMA, epsilon=1)
        self.assertIn("no-such-file.csv", cm.exception.message)

        with open(ARRESTS, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))[:3]
        rows[2]["sex"] = "Robot"
        with self.assertRaises(knowdp.CLIError) as cm:
            knowdp.release(binary=BIN, data=rows, schema=ARRESTS_SCHEMA, epsilon=1, cuboids=[["sex"]])
        self.assertRegex(cm.exception.message, r'row 4, column "sex": value "Robot" is not in the declared domain')


    def test_run_cli_and_its_timeout(self) -> None:
        p = knowdp.run_cli(["--version"], binary=BIN)
        self.assertIn("knowdp", p.stdout + p.stderr)
        with self.assertRaises(knowdp.UsageError) as cm:
            knowdp.run_cli(["release", "--bogus", "1"], binary=BIN)
        self.assertIn("--bogus", cm.exception.message)
        with tempfile.TemporaryDirectory() as d:
            # A server never exits by itself: the timeout stops it.
            with self.assertRaisesRegex(knowdp.KnowdpError, "stopped after timeout=0.5 s"):
                knowdp.run_cli(["serve", "--data-dir", d, "--admin-key-out", os.path.join(d, "k"),
                                "--addr", "127.0.0.1:0"], binary=BIN, timeout=0.5)


if __name__ == "__main__":
    unittest.main()
