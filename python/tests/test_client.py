"""knowdp.Client against a real `knowdp serve` on a free loopback port."""

from __future__ import annotations

import json
import unittest
import uuid

import knowdp

from . import _support as s

ARRESTS = s.DATA / "arrests.csv"
PERSONS = s.DATA / "us-persons.csv"

SERVER: "s.Server | None" = None
ADMIN: "knowdp.Client | None" = None


def setUpModule() -> None:
    global SERVER, ADMIN
    SERVER = s.Server(s.binary())
    ADMIN = knowdp.Client(SERVER.url, SERVER.admin_key)
    with open(s.DATA / "arrests.schema.json", encoding="utf-8") as f:
        arrests = json.load(f)
    with open(s.DATA / "us-geo.schema.json", encoding="utf-8") as f:
        geo = json.load(f)
    ADMIN.register_dataset("arrests", schema=arrests, source={"csv": "arrests.csv"},
                           policy={"epsilon_per_analyst": 2, "invariants": [["year"], ["colour"]]})
    ADMIN.register_dataset("arrests-zcdp", schema=arrests, source={"csv": "arrests.csv"},
                           policy={"rho_per_analyst": 1, "invariants": [["year"]]})
    ADMIN.register_dataset("usgeo", schema=geo, source={"csv": "us-persons.csv"},
                           policy={"epsilon_per_analyst": 2, "invariants": [["geo:state"]]})


def tearDownModule() -> None:
    if SERVER is not None:
        SERVER.stop()


def analyst() -> "tuple[knowdp.Client, dict]":
    """A new analyst (a fresh budget on every dataset) and its client."""
    assert SERVER is not None and ADMIN is not None
    made = ADMIN.create_analyst("analyst-" + uuid.uuid4().hex[:8])
    return knowdp.Client(SERVER.url, made["api_key"]), made


class ClientTest(unittest.TestCase):
    def test_budget_query_repeat_and_derived_answer(self) -> None:
        c, _ = analyst()
        b = c.budget("arrests")
        self.assertEqual((b["unit"], b["total"], b["spent"], b["remaining"]), ("epsilon", 2, 0, 2))

        a = c.cuboid("arrests", ["colour", "agegroup"], epsilon=0.5)
        self.assertFalse(a.repeat)
        self.assertFalse(a.derived)
        self.assertEqual((a.charged, a.remaining), (0.5, 1.5))
        self.assertEqual(a.privacy["epsilon"], 0.5)
        self.assertIs(a.privacy["private"], True)
        t = a.table(as_frames=False)
        self.assertEqual(s.columns(t), ["colour", "agegroup", "count", "moe90"])
        self.assertEqual(len(t), 2 * 5)
        self.assertTrue(all(row["moe90"] == a.answer["moe90"] for row in t))
        truth = s.true_counts(ARRESTS, ["colour"])  # an invariant: exact in every answer
        got = s.sums(t, [0], 2)
        for k, v in truth.items():
            self.assertAlmostEqual(got[k], v, delta=1e-6)

        again = c.cuboid("arrests", ["colour", "agegroup"], epsilon=0.5)
        self.assertTrue(again.repeat)
        self.assertEqual(again.charged, 0)
        self.assertEqual(again.query_id, a.query_id)
        self.assertEqual(again.answer["counts"], a.answer["counts"])

        d = c.cuboid("arrests", ["agegroup"], epsilon=0.5)
        self.assertTrue(d.derived)
        self.assertEqual(d.charged, 0)
        self.assertEqual(d.remaining, 1.5)
        self.assertEqual(d.privacy["derived_from"], [a.query_id])
        self.assertEqual(d.privacy["epsilon"], 0)
        dt = d.table(as_frames=False)
        self.assertEqual([row["agegroup"] for row in dt], ["12-17", "18-24", "25-34", "35-44", "45+"])
        self.assertAlmostEqual(sum(row["count"] for row in dt), sum(truth.values()), delta=1e-6)
        self.assertEqual(c.budget("arrests")["spent"], 0.5)

    def test_refusals_are_exceptions(self) -> None:
        c, _ = analyst()
        with self.assertRaises(knowdp.InsufficientBudgetError) as cm:
            c.cuboid("arrests", ["sex"], epsilon=5)
        e = cm.exception
        self.assertIsInstance(e, knowdp.ServerError)
        self.assertEqual((e.status, e.code), (403, "insufficient_budget"))
        self.assertIn("insufficient budget", e.message)
        self.assertTrue(e.idempotency_key)
        self.assertEqual(c.budget("arrests")["spent"], 0)

        with self.assertRaises(knowdp.ServerError) as cm:
            c.cuboid("arrests", ["nope"], epsilon=0.1)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "bad_request"))
        self.assertIn("nope", cm.exception.message)
        self.assertNotIsInstance(cm.exception, knowdp.InsufficientBudgetError)

        with self.assertRaises(knowdp.ServerError) as cm:
            c.budget("no-such-dataset")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))

        assert SERVER is not None
        with self.assertRaises(knowdp.ServerError) as cm:
            knowdp.Client(SERVER.url, "kdp_0000000000000000_x").budget("arrests")
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))

    def test_workload_linear_history(self) -> None:
        c, _ = analyst()
        w = c.workload("arrests", [["sex"], ["year", "sex"]], epsilon=0.3, integer=True)
        sex, year_sex = w.tables(as_frames=False)
        self.assertEqual(s.columns(year_sex), ["year", "sex", "count", "moe90"])
        self.assertTrue(all(isinstance(r["count"], int) and r["count"] >= 0 for r in sex + year_sex))
        self.assertEqual(dict(s.sums(year_sex, [0], 2)), dict(s.true_counts(ARRESTS, ["year"])))
        self.assertEqual(dict(s.sums(year_sex, [1], 2)), dict(s.sums(sex, [0], 1)))
        self.assertAlmostEqual(w.charged, 0.3, delta=1e-9)

        before = w.remaining
        q = [{"terms": [{"where": {"sex": ["Female"]}}]}, {"terms": [{"where": {"agegroup": ["12-17"]}, "coef": 2}]}]
        lin = c.linear("arrests", q, epsilon=0.2)
        self.assertEqual(len(lin.answers), 2)
        self.assertLessEqual(lin.charged, 0.2 + 1e-9)
        self.assertAlmostEqual(lin.remaining, before - lin.charged, delta=1e-9)
        with self.assertRaises(knowdp.KnowdpError):
            lin.table()

        k = "retry-" + uuid.uuid4().hex
        first = c.cuboid("arrests", ["employed"], epsilon=0.1, idempotency_key=k)
        retry = c.cuboid("arrests", ["employed"], epsilon=0.1, idempotency_key=k)
        self.assertTrue(retry.repeat)
        self.assertEqual(retry.charged, 0)

        h = c.history("arrests")
        self.assertEqual([a.query_id for a in h[:3]], [first.query_id, lin.query_id, w.query_id])
        self.assertEqual(c.get_query(w.query_id).answer, w.answer)
        self.assertEqual(len(c.history("arrests", limit=1)), 1)

    def test_views_at_levels(self) -> None:
        c, _ = analyst()
        with open(s.DATA / "us-geo.schema.json", encoding="utf-8") as f:
            parents = next(d for d in json.load(f)["dimensions"] if d["name"] == "geo")["parents"]
        to_division = {p: parents["division"][st] for p, st in parents["state"].items()}
        a = c.cuboid("usgeo", ["geo:division", "sex"], epsilon=0.5, integer=True)
        t = a.table(as_frames=False)
        self.assertEqual(s.columns(t), ["geo:division", "sex", "count", "moe90"])
        self.assertEqual(len(t), 9 * 2)
        self.assertEqual([r["moe90"] for r in t], a.answer["moe90s"])
        self.assertEqual(dict(s.sums(t, [0], 2)), dict(s.true_counts(PERSONS, ["geo"], {"geo": to_division})))
        region = c.cuboid("usgeo", ["geo:region"], epsilon=0.5)  # a roll-up of the invariant: public
        self.assertEqual(region.charged, 0)
        self.assertEqual(len(region.table(as_frames=False)), 4)

    def test_zcdp_dataset(self) -> None:
        c, _ = analyst()
        a = c.cuboid("arrests-zcdp", ["sex"], rho=0.25)
        self.assertEqual(a.unit, "rho")
        self.assertEqual(a.charged, 0.25)
        self.assertEqual(a.privacy["rho"], 0.25)
        self.assertEqual(c.budget("arrests-zcdp")["remaining"], 0.75)

    def test_dataframes(self) -> None:
        c, _ = analyst()
        a = c.cuboid("arrests", ["year", "sex"], epsilon=0.2)
        if not s.frames_expected():
            self.assertIsInstance(a.table(), list)
            return
        import pandas as pd
        df = a.table()
        self.assertIsInstance(df, pd.DataFrame)
        self.assertEqual(list(df.columns), ["year", "sex", "count", "moe90"])
        self.assertEqual(df.to_dict("records"), a.table(as_frames=False))

    def test_datasets_invariants_and_curator(self) -> None:
        c, made = analyst()
        self.assertEqual(c.me()["name"], made["analyst"]["name"])
        self.assertIn("arrests", [d["id"] for d in c.datasets()])
        ds = c.dataset("arrests")
        self.assertEqual(ds["invariants"], [["year"], ["colour"]])
        inv = {tuple(i["cuboid"]): i["counts"] for i in c.invariants("arrests")["invariants"]}
        years = next(d["values"] for d in ds["dimensions"] if d["name"] == "year")
        truth = s.true_counts(ARRESTS, ["year"])
        self.assertEqual(inv[("year",)], [truth[(y,)] for y in years])

        a = c.cuboid("arrests", ["citizen"], epsilon=0.1)
        assert ADMIN is not None
        self.assertIn(made["analyst"]["id"], [x["id"] for x in ADMIN.analysts()])
        self.assertIn(a.query_id, [q["id"] for q in ADMIN.admin_queries(dataset="arrests")])
        ADMIN.revoke_key(made["analyst"]["keys"][0]["id"])
        with self.assertRaises(knowdp.ServerError) as cm:
            c.budget("arrests")
        self.assertEqual(cm.exception.status, 401)
        self.assertNotIn(made["api_key"], repr(c))


if __name__ == "__main__":
    unittest.main()
