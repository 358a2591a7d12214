"""Tables as plain rows or, where pandas is installed, as DataFrames."""

from __future__ import annotations

import csv
import itertools
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ._errors import KnowdpError

Row = Dict[str, Union[str, int, float]]
"""One row of a table: column name -> value (dimension values are strings,
counts and margins numbers)."""

Rows = List[Row]
"""A table as a list of rows, every row with the same columns in the same order."""

_INT = re.compile(r"[+-]?[0-9]+\Z")


def pandas_module() -> Any:
    """Return the pandas module, or None when it cannot be imported."""
    try:
        import pandas  # type: ignore[import-not-found]
    except ImportError:
        return None
    return pandas


def want_frames(as_frames: Optional[bool]) -> bool:
    """Decide whether tables are returned as DataFrames.

    None means "DataFrames if pandas is installed, else rows"; True insists on
    DataFrames and fails clearly without pandas; False always gives rows.
    """
    if as_frames is None:
        return pandas_module() is not None
    if as_frames and pandas_module() is None:
        raise KnowdpError("as_frames=True needs pandas, which cannot be imported "
                          "(Debian: apt-get install python3-pandas); use as_frames=False for plain rows")
    return bool(as_frames)


def _numbers(texts: Sequence[str]) -> Optional[List[Union[int, float]]]:
    """Parse a column of numbers: all ints if every value is an integer,
    else all floats; None if some value is not a number."""
    if all(_INT.match(s) for s in texts):
        return [int(s) for s in texts]
    try:
        return [float(s) for s in texts]
    except ValueError:
        return None


def build(header: Sequence[str], cells: Sequence[Sequence[str]], ndims: int, frames: bool) -> Any:
    """Make a table from text cells.

    The first ``ndims`` columns hold dimension values and stay strings (a
    domain value such as ``1997`` is text, as the schema declares it); every
    other column whose values are all numbers becomes numbers. Column names
    are taken from the header as they are: nothing here knows their names.
    """
    columns: List[List[Any]] = [[row[j] for row in cells] for j in range(len(header))]
    for j in range(ndims, len(header)):
        parsed = _numbers(columns[j])
        if parsed is not None:
            columns[j] = parsed
    if frames:
        pd = pandas_module()
        data = {}
        for name, col in zip(header, columns):
            if col and isinstance(col[0], str):
                data[name] = pd.Series(col, dtype=object)
            else:
                data[name] = pd.Series(col)
        return pd.DataFrame(data, columns=list(header))
    return [dict(zip(header, values)) for values in zip(*columns)] if header else []


def read_csv(path: str, ndims: int, frames: bool) -> Any:
    """Read a released table's CSV file (header row, then one row per cell)."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise KnowdpError(f"{path}: empty table file (no header row)") from None
        cells = []
        for i, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise KnowdpError(f"{path}: row {i} has {len(row)} fields, the header {len(header)}")
            cells.append(row)
    return build(header, cells, ndims, frames)


def from_counts(
    dimensions: Sequence[str],
    values: Sequence[Sequence[str]],
    counts: Sequence[float],
    moe90: Union[None, float, Sequence[float]],
    frames: bool,
) -> Any:
    """Make a table from a server answer: ``counts`` row-major over the
    dimensions' ``values`` (the last dimension varying fastest), with a
    ``count`` column and, when the answer has margins of error, ``moe90``
    (one per cell, or the same on every row)."""
    cells = list(itertools.product(*values))
    if len(cells) != len(counts):
        raise KnowdpError(f"answer has {len(counts)} counts for {len(cells)} cells of {list(dimensions)}")
    header = list(dimensions) + ["count"]
    cols: List[List[Any]] = [[c[j] for c in cells] for j in range(len(dimensions))]
    cols.append([_plain(x) for x in counts])
    if moe90 is not None:
        header.append("moe90")
        if isinstance(moe90, (int, float)):
            cols.append([moe90] * len(cells))
        else:
            if len(moe90) != len(cells):
                raise KnowdpError(f"answer has {len(moe90)} margins of error for {len(cells)} cells")
            cols.append(list(moe90))
    if frames:
        pd = pandas_module()
        data = {}
        for j, (name, col) in enumerate(zip(header, cols)):
            data[name] = pd.Series(col, dtype=object) if j < len(dimensions) else pd.Series(col)
        return pd.DataFrame(data, columns=header)
    return [dict(zip(header, row)) for row in zip(*cols)] if cells else []


def _plain(x: float) -> Union[int, float]:
    """An integral JSON number stays an int (integer releases)."""
    return x if isinstance(x, int) else float(x)


def write_rows_csv(rows: Iterable[Mapping[str, Any]], path: str) -> None:
    """Write a list of dicts as CSV: the columns are every key, in the order
    first seen; a missing key or None is an empty cell."""
    rows = list(rows)
    fields: List[Any] = []
    seen = set()
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise TypeError(f"data: row {i} is a {type(r).__name__}, want a dict of column -> value")
        for k in r:
            if k not in seen:
                seen.add(k)
                fields.append(k)
    if not rows:
        raise ValueError("data: no rows (and so no columns): give a path, a DataFrame or a non-empty list of dicts")
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([str(k) for k in fields])
        for r in rows:
            w.writerow(["" if r.get(k) is None else str(r.get(k)) for k in fields])
