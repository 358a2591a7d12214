"""What the tests share: the repository, the knowdp binary, a running server,
counts computed independently from the bundled CSV files, and the switches
the Go test wrapper (python/python_test.go) sets.

Environment:
    KNOWDP_TEST_BINARY: a knowdp binary to use (else one is built with
        `go build` into a temporary directory, once per run).
    KNOWDP_TEST_SHORT=1: `go test -short`: only the tests that need no binary.
    KNOWDP_TEST_NO_PANDAS=1: run as if pandas were not installed.
    KNOWDP_TEST_REQUIRE_ALL=1: a missing dependency fails instead of skipping.
"""

from __future__ import annotations

import atexit
import collections
import csv
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data"
REQUIRE_ALL = os.environ.get("KNOWDP_TEST_REQUIRE_ALL") == "1"
SHORT = os.environ.get("KNOWDP_TEST_SHORT") == "1"
NO_PANDAS = os.environ.get("KNOWDP_TEST_NO_PANDAS") == "1"

if NO_PANDAS:
    # An entry of None makes `import pandas` raise ImportError, exactly as
    # on a machine without python3-pandas.
    sys.modules["pandas"] = None  # type: ignore[assignment]


def missing(why: str) -> None:
    """A dependency is missing: skip, or fail under KNOWDP_TEST_REQUIRE_ALL=1."""
    if REQUIRE_ALL:
        raise AssertionError(f"{why}, and KNOWDP_TEST_REQUIRE_ALL=1 forbids skipping")
    raise unittest.SkipTest(f"skipped: {why} (KNOWDP_TEST_REQUIRE_ALL=1 makes this a failure)")


def have_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def frames_expected() -> bool:
    """Whether tables come back as DataFrames by default in this pass: True
    with pandas, False in the KNOWDP_TEST_NO_PANDAS=1 pass. Without pandas
    on the machine (and no such pass asked for), the DataFrame path cannot
    be checked: skip, or fail under KNOWDP_TEST_REQUIRE_ALL=1."""
    if NO_PANDAS:
        return False
    if not have_pandas():
        missing("pandas is not installed (Debian: apt-get install python3-pandas)")
    return True


_binary: Optional[str] = None


def binary() -> str:
    """The knowdp binary: $KNOWDP_TEST_BINARY, or built once with go build."""
    global _binary
    if SHORT:
        raise unittest.SkipTest("KNOWDP_TEST_SHORT=1 (go test -short): needs the knowdp binary")
    if _binary is not None:
        return _binary
    given = os.environ.get("KNOWDP_TEST_BINARY")
    if given:
        _binary = given
        return _binary
    go = shutil.which("go")
    if go is None:
        missing("no knowdp binary: go is not on PATH and KNOWDP_TEST_BINARY is not set")
    d = tempfile.mkdtemp(prefix="knowdp-pytest-bin-")
    atexit.register(shutil.rmtree, d, True)
    out = os.path.join(d, "knowdp")
    p = subprocess.run([go, "build", "-o", out, "./cmd/knowdp"], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"go build ./cmd/knowdp failed:\n{p.stderr}")
    _binary = out
    return _binary


def read_csv(path: Path) -> Tuple[Sequence[str], list]:
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        header = next(r)
        return header, [row for row in r]


def true_counts(path: Path, columns: Sequence[str], maps: Optional[Dict[str, Dict[str, str]]] = None
                ) -> collections.Counter:
    """The exact counts of a CSV file grouped by columns, each value first
    mapped through maps[column] if given (a leaf to its ancestor at a level):
    the independent computation the releases' invariants are checked
    against."""
    header, rows = read_csv(path)
    idx = [header.index(c) for c in columns]
    maps = maps or {}
    c: collections.Counter = collections.Counter()
    for row in rows:
        key = tuple(maps[col][row[i]] if col in maps else row[i] for col, i in zip(columns, idx))
        c[key] += 1
    return c


def columns(table) -> list:
    """The column names of a table given as rows or as a DataFrame."""
    if hasattr(table, "columns"):
        return list(table.columns)
    return list(table[0]) if table else []


def records(table) -> list:
    """A table as a list of row dicts, whatever its form."""
    if hasattr(table, "to_dict"):
        return table.to_dict("records")
    return list(table)


def sums(table, ndims_keep: Sequence[int], ndims: int) -> collections.Counter:
    """Sum a table's count column (the first column after its ndims
    dimension columns) grouped by the dimension columns at positions
    ndims_keep. Columns are found by position, never by name."""
    cols = columns(table)
    count = cols[ndims]
    out: collections.Counter = collections.Counter()
    for r in records(table):
        out[tuple(r[cols[i]] for i in ndims_keep)] += r[count]
    return out


class Server:
    """A real `knowdp serve` on a free loopback port with a temporary data
    directory, the bundled data as its source directory and no rate limit."""

    def __init__(self, binary: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="knowdp-pytest-serve-")
        self.log_path = os.path.join(self.dir, "server.log")
        key_path = os.path.join(self.dir, "admin.key")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "serve", "--data-dir", os.path.join(self.dir, "state"), "--source-dir", str(DATA),
             "--admin-key-out", key_path, "--addr", "127.0.0.1:0", "--rate", "0"],
            stdout=subprocess.PIPE, stderr=self._log, text=True)
        lines: "queue.Queue[str]" = queue.Queue()
        def pump() -> None:
            # Reads until the server exits, so that it never blocks on a
            # full pipe, then closes its end.
            with self.proc.stdout:  # type: ignore[union-attr]
                for line in self.proc.stdout:  # type: ignore[union-attr]
                    lines.put(line)

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        try:
            first = lines.get(timeout=30)
        except queue.Empty:
            self.stop()
            raise AssertionError(f"knowdp serve printed no address within 30 s; log: {self.log()}")
        prefix = "listening on "
        if not first.startswith(prefix):
            self.stop()
            raise AssertionError(f"knowdp serve: unexpected first line {first!r}; log: {self.log()}")
        self.url = first[len(prefix):].strip()
        with open(key_path) as f:
            self.admin_key = f.read().strip()

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._pump.join(timeout=10)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
