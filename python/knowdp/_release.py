"""knowdp.release: run ``knowdp release`` and read back what it wrote."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _tables
from ._errors import BinaryNotFoundError, CLIError, KnowdpError, NotPrivateWarning, UsageError

PathLike = Union[str, "os.PathLike[str]"]

BUILD_HINT = ("build it from the repository root with `go build -o knowdp ./cmd/knowdp` "
              "and pass binary=\"./knowdp\", or put it on PATH")


def find_binary(binary: Optional[PathLike] = None) -> str:
    """Return the path of the ``knowdp`` command to run.

    ``binary`` if given (it must be an executable file), else ``knowdp`` on
    PATH; otherwise :class:`BinaryNotFoundError` says how to build it.
    """
    if binary is not None:
        path = os.fspath(binary)
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise BinaryNotFoundError(f"binary={path!r}: not an executable file; {BUILD_HINT}")
        return path
    found = shutil.which("knowdp")
    if found is None:
        raise BinaryNotFoundError(f"the knowdp command is not on PATH and no binary= was given: {BUILD_HINT}")
    return found


def run_cli(args: Sequence[str], binary: Optional[PathLike] = None,
            timeout: Optional[float] = None) -> subprocess.CompletedProcess:
    """Run ``knowdp ARGS...`` and return the finished process (stdout and
    stderr as text).

    A non-zero exit raises :class:`UsageError` (status 2: the arguments were
    refused before any data was read) or :class:`CLIError` (any other
    failure), carrying the command's message and exit status.
    """
    cmd = [find_binary(binary)] + [str(a) for a in args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except OSError as e:
        raise BinaryNotFoundError(f"{cmd[0]}: cannot run it ({e}); {BUILD_HINT}") from e
    except subprocess.TimeoutExpired as e:
        raise KnowdpError(f"knowdp {args[0] if args else ''}: stopped after timeout={timeout} s") from e
    if p.returncode != 0:
        message = _message(p.stderr) or f"{cmd[0]} exited with status {p.returncode}"
        cls = UsageError if p.returncode == 2 else CLIError
        raise cls(message, p.returncode, p.stderr, cmd)
    return p


def _message(stderr: str) -> str:
    """The error of a failed command: its standard error without the
    warnings it printed on the way and the usage hint."""
    keep = [line for line in stderr.splitlines()
            if line.strip() and not line.startswith("WARNING") and not line.startswith("Run 'knowdp help")]
    return "\n".join(keep).strip()


class Release:
    """What ``knowdp release`` wrote, read back.

    Attributes:
        tables: each released table by name (the name of its file without
            the extension, as the command named it; a single table is named
            after ``out``, ``release`` by default), as a list of row dicts or,
            where pandas is used, a DataFrame. Dimension columns hold strings;
            counts and margins of error are numbers.
        cuboids: each table's cuboid (its dimensions, ``"dim:level"`` for a
            level of a hierarchy), by table name.
        metadata: the release's privacy story: ``release.json`` for several
            cuboids, the sidecar ``OUT.json`` for one (mechanism, epsilon or
            rho, neighbours, sensitivity, ``private``, ``guarantee``, ...).
        files: each table's file by name, when ``out`` was given (the files
            stay there); None when the release was made in a temporary
            directory that is gone.
        out: the output path given, or None.
        stdout, stderr: what the command printed (its summary and warnings).
        command: the command line that was run.
    """

    def __init__(self, tables: Dict[str, Any], cuboids: Dict[str, List[str]], metadata: Dict[str, Any],
                 files: Optional[Dict[str, str]], out: Optional[str], stdout: str, stderr: str,
                 command: List[str]) -> None:
        self.tables = tables
        self.cuboids = cuboids
        self.metadata = metadata
        self.files = files
        self.out = out
        self.stdout = stdout
        self.stderr = stderr
        self.command = command

    @property
    def private(self) -> bool:
        """True only if the command says the release is differentially
        private (``"private": true``): False for seeded runs and domains read
        from the data. Read ``guarantee`` too: a release resting on a
        sensitivity you claimed is ``conditional``."""
        return self.metadata.get("private") is True

    @property
    def guarantee(self) -> Optional[str]:
        """``unconditional``, ``conditional`` or ``none`` (the sidecar's field)."""
        return self.metadata.get("guarantee")

    def table(self, *cuboid: Union[str, Sequence[str]]) -> Any:
        """Return the table of a cuboid, given as its dimensions in any order
        (``r.table("year", "colour")``, ``r.table(["geo:state", "sex"])``;
        ``r.table([])`` is the grand total), or the only table when called
        without arguments on a release of one table."""
        if not cuboid:
            if len(self.tables) != 1:
                raise KeyError(f"this release has {len(self.tables)} tables ({', '.join(self.tables)}): name the cuboid")
            return next(iter(self.tables.values()))
        if len(cuboid) == 1 and not isinstance(cuboid[0], str):
            want = list(cuboid[0])
        else:
            want = list(cuboid)  # type: ignore[arg-type]
        for name, dims in self.cuboids.items():
            if sorted(dims) == sorted(want):
                return self.tables[name]
        have = "; ".join(f"{name}: {dims}" for name, dims in self.cuboids.items())
        raise KeyError(f"no table of cuboid {want} in this release (its tables: {have})")

    def __repr__(self) -> str:
        what = "private" if self.private else "NOT private"
        budget = ""
        if "rho" in self.metadata:
            budget = f" rho={self.metadata['rho']!r}"
        elif "epsilon" in self.metadata:
            budget = f" epsilon={self.metadata['epsilon']!r}"
        return f"<knowdp.Release {what}{budget} tables={list(self.tables)}>"


def _dims(c: Any, what: str) -> str:
    """One cuboid as the CLI's DIMS argument ("" for the grand total)."""
    if isinstance(c, (str, bytes)) or not isinstance(c, (list, tuple)):
        raise TypeError(f"{what}: {c!r} is not a list of dimension names: {what.split('[')[0]} is a list of cuboids, "
                        f"each a list such as [\"year\", \"colour\"] ([] for the grand total)")
    for d in c:
        if not isinstance(d, str) or not d or "," in d:
            raise ValueError(f"{what}: {d!r} is not a dimension name (a non-empty string without commas, "
                             f"\"dim:level\" for a level)")
    return ",".join(c)


def _num(x: Any, what: str) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{what}: {x!r} is not a number")
    return repr(x) if isinstance(x, float) else str(x)


def release(
    *,
    data: Any,
    schema: Union[PathLike, Mapping[str, Any]],
    cuboids: Optional[Sequence[Sequence[str]]] = None,
    exact: Optional[Sequence[Sequence[str]]] = None,
    epsilon: Optional[float] = None,
    rho: Optional[float] = None,
    delta: Optional[float] = None,
    integer: bool = True,
    nonneg: bool = False,
    seed: Optional[int] = None,
    binary: Optional[PathLike] = None,
    out: Optional[PathLike] = None,
    weights: Optional[Sequence[float]] = None,
    split: Optional[str] = None,
    strategy: Optional[str] = None,
    sensitivity: Optional[int] = None,
    count_column: Optional[str] = None,
    table: Optional[str] = None,
    measurements: Optional[PathLike] = None,
    cell_limit: Optional[int] = None,
    as_frames: Optional[bool] = None,
    extra_args: Sequence[str] = (),
    timeout: Optional[float] = None,
) -> Release:
    """Release tables of counts with ``knowdp release`` and read them back.

    Args:
        data: the fact table: a path (CSV, Parquet, SQLite, or a
            ``postgres://`` URL with ``table``), a pandas DataFrame, or a list
            of dicts (column -> value). A DataFrame or rows are written to a
            CSV file in a private temporary directory, deleted afterwards.
        schema: the schema: a path to its JSON file, or the dict itself
            (``{"dimensions": [{"name": ..., "values": [...]}, ...]}``).
            Domains come from the schema, never from the data.
        cuboids: the tables to release, each a list of dimension names
            (``"geo:state"`` for a level of a hierarchy, ``[]`` for the grand
            total). One cuboid is one table; several are released together
            under one budget, every table consistent with the others. None
            releases the base cuboid.
        exact: cuboids published exactly (public invariants), in the same form.
        epsilon: the privacy loss of the whole release (Laplace noise).
        rho: instead of epsilon, the zCDP parameter (Gaussian noise);
            ``delta`` is the delta at which the sidecar states the equivalent
            (eps, delta).
        integer: non-negative integer counts that keep every invariant
            (default True); False gives real counts.
        nonneg: real non-negative counts (needs ``integer=False``).
        seed: reproducible noise. A seeded release is NOT differentially
            private: its metadata says so and a :class:`NotPrivateWarning`
            is issued. Never publish it.
        binary: the ``knowdp`` command (default: ``knowdp`` on PATH).
        out: where to write the release and keep it (a CSV or Parquet file
            for one cuboid, a new directory for several); the command never
            overwrites an existing file. None: a temporary directory.
        weights: one weight per cuboid in the split's objective (several
            cuboids; written as a workload file).
        split, strategy, sensitivity, count_column, table, measurements,
        cell_limit: the flags of the same names (``knowdp help release``).
        as_frames: DataFrames (True), rows (False), or DataFrames if pandas
            is installed (None).
        extra_args: more arguments for ``knowdp release``, as given.
        timeout: seconds before the command is stopped.

    Returns:
        a :class:`Release` with ``tables`` and ``metadata``.

    Raises:
        UsageError: the command refused its arguments (exit status 2).
        CLIError: the command failed (exit status 1): its message names the
            flag, file, row and column.
        BinaryNotFoundError: no ``knowdp`` command to run.
        TypeError, ValueError: arguments this function cannot pass on.
    """
    frames = _tables.want_frames(as_frames)
    if integer and nonneg:
        raise ValueError("nonneg=True needs integer=False: integer counts are non-negative already")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed: {seed!r} is not an integer")
    if isinstance(cuboids, (str, bytes)):
        raise TypeError("cuboids: a list of cuboids, each a list of dimension names: cuboids=[[\"year\", \"colour\"]]")
    if isinstance(exact, (str, bytes)):
        raise TypeError("exact: a list of cuboids, each a list of dimension names: exact=[[\"year\"]]")
    cub = [_dims(c, f"cuboids[{i}]") for i, c in enumerate(cuboids)] if cuboids is not None else None
    exa = [_dims(e, f"exact[{i}]") for i, e in enumerate(exact or [])]
    wts = [_num(w, f"weights[{i}]") for i, w in enumerate(weights)] if weights is not None else None
    if wts is not None and (cub is None or len(wts) != len(cub)):
        raise ValueError("weights: give one weight per cuboid of cuboids")
    nums = [(flag, _num(v, name)) for flag, v, name in (
        ("--epsilon", epsilon, "epsilon"), ("--rho", rho, "rho"), ("--delta", delta, "delta"),
        ("--sensitivity", sensitivity, "sensitivity"), ("--cell-limit", cell_limit, "cell_limit"))
        if v is not None]
    _check_inputs(data, schema)
    exe = find_binary(binary)

    with tempfile.TemporaryDirectory(prefix="knowdp-") as tmp:
        args: List[str] = ["release"]
        args += ["--data", _data_path(data, tmp)]
        args += ["--schema", _schema_path(schema, tmp)]
        for e in exa:
            args += ["--exact", e]
        several = cub is not None and (len(cub) > 1 or wts is not None)
        if wts is not None:
            workload = [{"cuboid": list(c), "weight": w} for c, w in zip(cuboids or [], weights or [])]
            wpath = os.path.join(tmp, "workload.json")
            with open(wpath, "w", encoding="utf-8") as f:
                json.dump(workload, f)
            args += ["--workload", wpath]
        else:
            for c in cub or []:
                args += ["--cuboid", c]
        for flag, v in nums:
            if flag == "--rho":
                args += ["--mechanism", "gaussian"]
            args += [flag, v]
        if integer:
            args.append("--integer")
        if nonneg:
            args.append("--nonneg")
        if seed is not None:
            args += ["--seed", str(seed)]
        for flag, value in (("--split", split), ("--strategy", strategy), ("--count-column", count_column),
                            ("--table", table)):
            if value is not None:
                args += [flag, str(value)]
        if measurements is not None:
            args += ["--measurements", os.fspath(measurements)]
        target = os.fspath(out) if out is not None else os.path.join(tmp, "release" if several else "release.csv")
        args += ["--out", target]
        args += [str(a) for a in extra_args]

        p = run_cli(args, exe, timeout)
        rel = _read(target, frames, keep=out is not None)
        rel.stdout, rel.stderr, rel.command = p.stdout, p.stderr, [exe] + args
    if not rel.private:
        why = []
        if rel.metadata.get("seeded"):
            why.append(f"seeded noise (seed={seed})")
        if rel.metadata.get("domains_from_data"):
            why.append("domains read from the data")
        warnings.warn(NotPrivateWarning("knowdp release: this release is NOT differentially private"
                                        + (": " + ", ".join(why) if why else "") + "; never publish it"),
                      stacklevel=2)
    return rel


def _is_frame(data: Any) -> bool:
    return hasattr(data, "to_csv") and hasattr(data, "columns")


def _check_inputs(data: Any, schema: Any) -> None:
    """Refuse what cannot be passed on, before anything runs."""
    if not (isinstance(data, (str, os.PathLike, list, tuple)) or _is_frame(data)):
        raise TypeError(f"data: a {type(data).__name__}; want a path, a pandas DataFrame or a list of dicts")
    if not isinstance(schema, (str, os.PathLike, Mapping)):
        raise TypeError(f"schema: a {type(schema).__name__}; want a path to a schema JSON file or the schema as a dict")


def _data_path(data: Any, tmp: str) -> str:
    if isinstance(data, (str, os.PathLike)):
        return os.fspath(data)
    path = os.path.join(tmp, "data.csv")
    if _is_frame(data):
        data.to_csv(path, index=False)
        return path
    if isinstance(data, (list, tuple)):
        _tables.write_rows_csv(data, path)
        return path
    raise TypeError(f"data: a {type(data).__name__}; want a path, a pandas DataFrame or a list of dicts")


def _schema_path(schema: Any, tmp: str) -> str:
    if isinstance(schema, (str, os.PathLike)):
        return os.fspath(schema)
    if isinstance(schema, Mapping):
        path = os.path.join(tmp, "schema.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(schema, f)
        return path
    raise TypeError(f"schema: a {type(schema).__name__}; want a path to a schema JSON file or the schema as a dict")


def _read(target: str, frames: bool, keep: bool) -> Release:
    """Read the tables and metadata a release wrote at target."""
    if os.path.isdir(target):
        meta_path = os.path.join(target, "release.json")
        base = target
    else:
        meta_path = os.path.splitext(target)[0] + ".json"
        base = os.path.dirname(target)
    try:
        with open(meta_path, encoding="utf-8") as f:
            metadata = json.load(f)
    except (OSError, ValueError) as e:
        raise KnowdpError(f"knowdp release succeeded but its metadata {meta_path} cannot be read: {e}") from e
    entries = metadata.get("tables")
    if isinstance(entries, list):
        listed = [(os.path.join(base, t["file"]), list(t.get("cuboid") or [])) for t in entries]
    else:
        # One table: the file itself, its cuboid in the sidecar's tables.
        tabs = metadata.get("tables") or [{}]
        listed = [(target, list(tabs[0].get("cuboid") or metadata.get("cuboid") or []))]
    tables: Dict[str, Any] = {}
    cuboids: Dict[str, List[str]] = {}
    files: Dict[str, str] = {}
    for path, cuboid in listed:
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            tables[name] = _read_table(path, len(cuboid), frames)
        except OSError as e:
            raise KnowdpError(f"knowdp release succeeded but its table {path} cannot be read: {e}") from e
        cuboids[name] = cuboid
        files[name] = path
    return Release(tables, cuboids, metadata, files if keep else None, target if keep else None, "", "", [])


def _read_table(path: str, ndims: int, frames: bool) -> Any:
    if path.endswith(".parquet"):
        pd = _tables.pandas_module()
        if pd is None:
            raise KnowdpError(f"{path}: reading Parquet needs pandas with pyarrow; release as CSV instead")
        df = pd.read_parquet(path)
        return df if frames else df.to_dict("records")
    return _tables.read_csv(path, ndims, frames)
