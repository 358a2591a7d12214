"""Tests that need no knowdp binary and no server (they run under go test -short too)."""

from __future__ import annotations

import email.message
import io
import os
import re
import socket
import sys
import tempfile
import unittest
import urllib.error
from unittest import mock

import knowdp
from knowdp import _client, _release, _tables

from . import _support as s


class TablesTest(unittest.TestCase):
    def write(self, text: str) -> str:
        fd, path = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path

    def test_dimension_columns_stay_text_numbers_become_numbers(self) -> None:
        path = self.write("year,sex,count,moe90,note\r\n1997,F,12,3.5,a\r\n1998,M,-1,0,b\r\n")
        rows = _tables.read_csv(path, 2, frames=False)
        self.assertEqual(rows, [
            {"year": "1997", "sex": "F", "count": 12, "moe90": 3.5, "note": "a"},
            {"year": "1998", "sex": "M", "count": -1, "moe90": 0.0, "note": "b"},
        ])
        self.assertIsInstance(rows[1]["moe90"], float)  # one type per column

    def test_grand_total_and_byte_order_mark(self) -> None:
        path = self.write("\ufeffcount,moe90\n5226,0\n")
        self.assertEqual(_tables.read_csv(path, 0, frames=False), [{"count": 5226, "moe90": 0}])

    def test_ragged_file_names_the_row(self) -> None:
        path = self.write("a,count\nx,1\ny\n")
        with self.assertRaisesRegex(knowdp.KnowdpError, "row 3 has 1 fields, the header 2"):
            _tables.read_csv(path, 1, frames=False)

    def test_counts_are_row_major_last_fastest(self) -> None:
        rows = _tables.from_counts(["a", "b"], [["a1", "a2"], ["b1", "b2", "b3"]], [1, 2, 3, 4, 5, 6.5], 2.0,
                                   frames=False)
        self.assertEqual([(r["a"], r["b"], r["count"], r["moe90"]) for r in rows],
                         [("a1", "b1", 1, 2.0), ("a1", "b2", 2, 2.0), ("a1", "b3", 3, 2.0),
                          ("a2", "b1", 4, 2.0), ("a2", "b2", 5, 2.0), ("a2", "b3", 6.5, 2.0)])
        per_cell = _tables.from_counts(["a"], [["x", "y"]], [1, 2], [0.5, 0.7], frames=False)
        self.assertEqual([r["moe90"] for r in per_cell], [0.5, 0.7])
        self.assertEqual(_tables.from_counts([], [], [7], None, frames=False), [{"count": 7}])
        with self.assertRaisesRegex(knowdp.KnowdpError, "3 counts for 2 cells"):
            _tables.from_counts(["a"], [["x", "y"]], [1, 2, 3], None, frames=False)

    def test_without_pandas(self) -> None:
        with mock.patch.dict(sys.modules, {"pandas": None}):
            self.assertIsNone(_tables.pandas_module())
            self.assertFalse(_tables.want_frames(None))
            self.assertFalse(_tables.want_frames(False))
            with self.assertRaisesRegex(knowdp.KnowdpError, "apt-get install python3-pandas"):
                _tables.want_frames(True)

    def test_with_pandas(self) -> None:
        if not s.frames_expected():
            self.assertFalse(_tables.want_frames(None))
            return
        self.assertTrue(_tables.want_frames(None))
        df = _tables.from_counts(["year"], [["1997", "1998"]], [3, 4], 1.5, frames=True)
        self.assertEqual(list(df.columns), ["year", "count", "moe90"])
        self.assertEqual(df["year"].tolist(), ["1997", "1998"])
        self.assertEqual(str(df["count"].dtype), "int64")

    def test_rows_to_csv(self) -> None:
        fd, path = tempfile.mkstemp(suffix=".csv")
        os.close(fd)
        self.addCleanup(os.remove, path)
        _tables.write_rows_csv([{"a": 1, "b": "x"}, {"b": "y", "c": None}, {"c": "z,w"}], path)
        with open(path, encoding="utf-8") as f:
            self.assertEqual(f.read(), 'a,b,c\n1,x,\n,y,\n,,"z,w"\n')
        with self.assertRaisesRegex(TypeError, "row 1 is a list"):
            _tables.write_rows_csv([{"a": 1}, [1]], path)
        with self.assertRaisesRegex(ValueError, "no rows"):
            _tables.write_rows_csv([], path)


class ReleaseArgumentsTest(unittest.TestCase):
    def test_no_binary_says_how_to_build_it(self) -> None:
        with mock.patch.dict(os.environ, {"PATH": ""}):
            with self.assertRaises(knowdp.BinaryNotFoundError) as cm:
                knowdp.release(data="data/arrests.csv", schema="data/arrests.schema.json", epsilon=1)
        self.assertIn("go build -o knowdp ./cmd/knowdp", str(cm.exception))
        with self.assertRaisesRegex(knowdp.BinaryNotFoundError, "not an executable file.*go build -o knowdp"):
            knowdp.find_binary("/nonexistent/knowdp")

    def test_arguments_refused_before_running(self) -> None:
        kw = dict(data="d.csv", schema="s.json", epsilon=1, binary="/nonexistent/knowdp")
        cases = [
            (TypeError, "cuboids\\[0\\]: 'year' is not a list of dimension names", dict(cuboids=["year", "colour"])),
            (TypeError, "cuboids: a list of cuboids", dict(cuboids="year,colour")),
            (ValueError, "not a dimension name", dict(cuboids=[["year,colour"]])),
            (TypeError, "exact\\[0\\]", dict(exact=["year"])),
            (ValueError, "nonneg=True needs integer=False", dict(nonneg=True)),
            (TypeError, "seed", dict(seed="1")),
            (TypeError, "epsilon: '1' is not a number", dict(epsilon="1")),
            (ValueError, "one weight per cuboid", dict(cuboids=[["a"]], weights=[1, 2])),
            (TypeError, "data: a int", dict(data=42)),
            (TypeError, "schema: a list", dict(schema=[])),
        ]
        for exc, pattern, over in cases:
            with self.subTest(over=over):
                with self.assertRaisesRegex(exc, pattern):
                    knowdp.release(**{**kw, **over})

    def test_cli_message(self) -> None:
        err = ("WARNING: --seed 1 makes the noise predictable\n"
               "knowdp release: --epsilon: epsilon must be > 0, got 0\n"
               "Run 'knowdp help release' for usage.\n")
        self.assertEqual(_release._message(err), "knowdp release: --epsilon: epsilon must be > 0, got 0")
        e = knowdp.UsageError("m", 2, err, ["knowdp", "release"])
        self.assertIsInstance(e, knowdp.CLIError)
        self.assertEqual(str(e), "m (exit status 2)")


class PackageTest(unittest.TestCase):
    def test_pyproject_matches_the_package(self) -> None:
        text = (s.REPO / "python" / "pyproject.toml").read_text(encoding="utf-8")
        version = re.search(r'^version = "([^"]+)"$', text, re.M)
        self.assertIsNotNone(version)
        self.assertEqual(version.group(1), knowdp.__version__)  # type: ignore[union-attr]
        self.assertRegex(text, r'(?m)^dependencies = \[\]$')  # standard library only
        for name in knowdp.__all__:
            self.assertTrue(hasattr(knowdp, name), name)


class ClientUnitTest(unittest.TestCase):
    def http_error(self, status: int, body: bytes, retry_after: str = "") -> urllib.error.HTTPError:
        h = email.message.Message()
        if retry_after:
            h["Retry-After"] = retry_after
        return urllib.error.HTTPError("http://x/", status, "reason", h, io.BytesIO(body))

    def test_server_errors(self) -> None:
        e = _client._server_error(self.http_error(
            403, b'{"error":{"code":"insufficient_budget","message":"insufficient budget: needs 5"}}'), "k1")
        self.assertIsInstance(e, knowdp.InsufficientBudgetError)
        self.assertEqual((e.status, e.code, e.message, e.idempotency_key), (403, "insufficient_budget",
                                                                           "insufficient budget: needs 5", "k1"))
        e = _client._server_error(self.http_error(
            503, b'{"error":{"code":"unavailable","message":"try again"}}', "2"), None)
        self.assertNotIsInstance(e, knowdp.InsufficientBudgetError)
        self.assertEqual((e.code, e.retry_after), ("unavailable", 2.0))
        self.assertEqual(str(e), "unavailable: try again (HTTP 503)")
        e = _client._server_error(self.http_error(502, b"<html>bad gateway</html>"), None)
        self.assertEqual((e.status, e.code, e.message), (502, "http_502", "<html>bad gateway</html>"))

    def test_unreachable(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        c = knowdp.Client(f"http://127.0.0.1:{port}", "kdp_x", timeout=5)
        with self.assertRaises(knowdp.ServerUnreachableError) as cm:
            c.budget("arrests")
        self.assertIn(f"127.0.0.1:{port}/v1/datasets/arrests/budget", str(cm.exception))
        with self.assertRaisesRegex(ValueError, "not an http"):
            knowdp.Client("localhost:8080", "k")

    def test_requests_are_what_the_server_documents(self) -> None:
        sent = []
        c = knowdp.Client("http://127.0.0.1:1/", "kdp_secret")
        c._request = lambda method, path, body=None, params=None, headers=None: (  # type: ignore[method-assign]
            sent.append((method, path, body, dict(headers or {}))) or {"answer": {}})
        c.cuboid("a b", ["year", "geo:state"], epsilon=0.5, integer=True, idempotency_key="k")
        c.workload("d", [["x"], []], rho=0.1, delta=1e-7, weights=[1, 2], split="equal")
        c.linear("d", [{"terms": [{"where": {"sex": ["F"]}}]}], epsilon=0.2, refine=True)
        self.assertEqual(sent[0], ("POST", "/v1/datasets/a%20b/queries",
                                   {"kind": "cuboid", "cuboid": ["year", "geo:state"], "epsilon": 0.5,
                                    "integer": True}, {"Idempotency-Key": "k"}))
        self.assertEqual(sent[1][2], {"kind": "cuboid", "cuboids": [["x"], []], "mechanism": "gaussian",
                                      "rho": 0.1, "delta": 1e-7, "weights": [1, 2], "split": "equal"})
        self.assertTrue(sent[1][3]["Idempotency-Key"].startswith("py-"))
        self.assertEqual(sent[2][2], {"kind": "linear", "epsilon": 0.2, "refine": True,
                                      "queries": [{"terms": [{"where": {"sex": ["F"]}}]}]})
        self.assertNotIn("kdp_secret", repr(c))
        with self.assertRaisesRegex(TypeError, "not a list of dimension names"):
            c.cuboid("d", "year", epsilon=1)


if __name__ == "__main__":
    unittest.main()
