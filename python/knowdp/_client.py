"""knowdp.Client: the query server (``knowdp serve``) over HTTP, with urllib."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import _tables
from ._errors import InsufficientBudgetError, KnowdpError, ServerError, ServerUnreachableError


class Answer:
    """One answered query, as the server returned it.

    Attributes:
        response: the whole response (``seq``, ``query_id``, ``kind``,
            ``repeat``, ``answer``, ``budget``, ``charged``, ``remaining``, ...).
        answer: the answer itself, with its privacy story in ``privacy``.
        idempotency_key: the ``Idempotency-Key`` the query was sent with.
    """

    def __init__(self, response: Dict[str, Any], client: "Client",
                 idempotency_key: Optional[str] = None) -> None:
        self.response = response
        self.answer: Dict[str, Any] = response.get("answer") or {}
        self.idempotency_key = idempotency_key
        self._client = client

    @property
    def query_id(self) -> str:
        """The query's id (``q_...``)."""
        return self.response.get("query_id", "")

    @property
    def dataset(self) -> str:
        """The dataset the query was asked on."""
        return self.response.get("dataset", "")

    @property
    def kind(self) -> str:
        """``cuboid``, ``linear``, ``prior`` or ``dx``."""
        return self.response.get("kind", "")

    @property
    def repeat(self) -> bool:
        """True when this is the stored answer of an earlier request (charged nothing now)."""
        return bool(self.response.get("repeat"))

    @property
    def charged(self) -> float:
        """What this request cost now (epsilon, or rho on a zCDP dataset): 0 for a repeat."""
        return self.response.get("charged", 0)

    @property
    def remaining(self) -> float:
        """The budget left on the dataset after this request."""
        return self.response.get("remaining", 0)

    @property
    def unit(self) -> str:
        """``epsilon`` or ``rho``: the unit of the dataset's budget."""
        return self.response.get("unit", "epsilon")

    @property
    def budget(self) -> Dict[str, Any]:
        """The budget after this request: total, spent, remaining (and exact steps of 2^-40)."""
        return self.response.get("budget") or {}

    @property
    def privacy(self) -> Dict[str, Any]:
        """The answer's privacy story: mechanism, epsilon or rho, neighbours, sensitivity, ..."""
        return self.answer.get("privacy") or {}

    @property
    def derived(self) -> bool:
        """True when the answer was estimated, free, from the analyst's own
        earlier measurements (listed in ``privacy["derived_from"]``)."""
        return bool(self.privacy.get("derived"))

    @property
    def answers(self) -> List[Any]:
        """The noisy answers of a linear, prior or d_X query."""
        a = self.answer.get("answers")
        return list(a) if a is not None else []

    def tables(self, as_frames: Optional[bool] = None) -> List[Any]:
        """The tables of a cuboid answer (one, or one per cuboid of a
        workload), each as rows or a DataFrame with a column per dimension
        (named as the answer names it, ``"geo:state"`` for a level), then
        ``count`` and ``moe90``."""
        frames = _tables.want_frames(as_frames)
        if "tables" in self.answer:
            return [self._table(t, t.get("moe90s", t.get("moe90")), frames) for t in self.answer["tables"]]
        if "counts" in self.answer:
            moe = self.answer.get("moe90s", self.answer.get("moe90", self.privacy.get("moe90")))
            return [self._table(self.answer, moe, frames)]
        raise KnowdpError(f"a {self.kind} answer has no tables (its values are in .answers)")

    def table(self, as_frames: Optional[bool] = None) -> Any:
        """The table of a one-cuboid answer (see :meth:`tables`)."""
        ts = self.tables(as_frames)
        if len(ts) != 1:
            raise KnowdpError(f"this answer has {len(ts)} tables: use .tables()")
        return ts[0]

    def _table(self, t: Mapping[str, Any], moe: Any, frames: bool) -> Any:
        dims = list(t.get("dimensions") or [])
        values = t.get("values")
        if values is None:
            # A flat cuboid's cells are its dimensions' declared domains,
            # which the dataset publishes.
            domains = self._client._domains(self.dataset)
            try:
                values = [domains[d] for d in dims]
            except KeyError as e:
                raise KnowdpError(f"dimension {e} of the answer is not in dataset {self.dataset!r}'s schema") from None
        return _tables.from_counts(dims, values, t.get("counts") or [], moe, frames)

    def __repr__(self) -> str:
        extra = " repeat" if self.repeat else ""
        extra += " derived" if self.derived else ""
        return f"<knowdp.Answer {self.query_id} {self.kind}{extra} charged={self.charged} remaining={self.remaining}>"


class Client:
    """A client of the knowdp query server (``knowdp serve``).

    ``Client(url, api_key)``: the server's base URL (``http://127.0.0.1:8080``)
    and an API key, an analyst's (queries) or the curator's admin key (the
    ``admin_`` and registration methods). Every error the server answers is
    raised as :class:`ServerError` (or :class:`InsufficientBudgetError`)
    carrying its HTTP status, error code and message.
    """

    def __init__(self, url: str, api_key: str, *, timeout: float = 120.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url: {url!r} is not an http:// or https:// URL")
        self.url = url.rstrip("/")
        self._key = api_key
        self.timeout = timeout
        self._domain_cache: Dict[str, Dict[str, List[str]]] = {}

    def __repr__(self) -> str:
        # Never the key: reprs end up in logs.
        return f"<knowdp.Client {self.url}>"

    # --- HTTP ---

    def _request(self, method: str, path: str, body: Any = None, params: Optional[Mapping[str, Any]] = None,
                 headers: Optional[Mapping[str, str]] = None) -> Any:
        url = self.url + path
        if params:
            q = {k: v for k, v in params.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self._key)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        idem = (headers or {}).get("Idempotency-Key")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise _server_error(e, idem) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ServerUnreachableError(f"{method} {self.url}{path}: {reason}") from e
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError as e:
            raise KnowdpError(f"{method} {self.url}{path}: the answer is not JSON: {raw[:200]!r}") from e

    def _get(self, path: str, **params: Any) -> Any:
        return self._request("GET", path, params=params)

    @staticmethod
    def _seg(s: str) -> str:
        return urllib.parse.quote(s, safe="")

    # --- analysts ---

    def health(self) -> Dict[str, Any]:
        """``GET /healthz``: the server and its store are up."""
        return self._get("/healthz")

    def me(self) -> Dict[str, Any]:
        """Who the key belongs to (analyst id, name, key id)."""
        return self._get("/v1/me")

    def datasets(self) -> List[Dict[str, Any]]:
        """The datasets: schemas, invariants, policies."""
        return self._get("/v1/datasets").get("datasets", [])

    def dataset(self, dataset: str) -> Dict[str, Any]:
        """One dataset: its dimensions and their domains, invariants, generic sensitivity, policy."""
        return self._get("/v1/datasets/" + self._seg(dataset))

    def invariants(self, dataset: str) -> Dict[str, Any]:
        """The published exact cuboids (public) and their counts."""
        return self._get(f"/v1/datasets/{self._seg(dataset)}/invariants")

    def budget(self, dataset: str) -> Dict[str, Any]:
        """Your budget on the dataset: ``total``, ``spent``, ``remaining`` (in
        ``unit``, epsilon or rho) and the same in exact steps of 2^-40."""
        return self._get(f"/v1/datasets/{self._seg(dataset)}/budget")

    def query(self, dataset: str, request: Mapping[str, Any], *, idempotency_key: Optional[str] = None) -> Answer:
        """Ask any query (``POST /v1/datasets/{id}/queries``), the request
        as the server documents it (``{"kind": "cuboid", "epsilon": 0.5,
        "cuboid": ["year", "sex"]}``).

        The request is sent with an ``Idempotency-Key`` (a fresh one unless
        given): after a 503 or a lost connection, asking again with the same
        key (``ServerError.idempotency_key``) returns the answer if it was
        committed, and never charges twice.
        """
        key = idempotency_key or "py-" + uuid.uuid4().hex
        resp = self._request("POST", f"/v1/datasets/{self._seg(dataset)}/queries", body=dict(request),
                             headers={"Idempotency-Key": key})
        return Answer(resp, self, key)

    def cuboid(self, dataset: str, cuboid: Sequence[str], *, epsilon: Optional[float] = None,
               rho: Optional[float] = None, delta: Optional[float] = None, integer: bool = False,
               nonneg: bool = False, idempotency_key: Optional[str] = None) -> Answer:
        """One noisy table of counts: ``cuboid`` names its dimensions
        (``"geo:state"`` for a level), ``epsilon`` its cost (or ``rho``, with
        Gaussian noise, on a zCDP dataset). A cuboid contained in one you
        already paid for is answered free from your own measurements
        (``Answer.derived``)."""
        req: Dict[str, Any] = {"kind": "cuboid", "cuboid": _names(cuboid, "cuboid")}
        _budget_fields(req, epsilon, rho, delta)
        if integer:
            req["integer"] = True
        if nonneg:
            req["nonneg"] = True
        return self.query(dataset, req, idempotency_key=idempotency_key)

    def workload(self, dataset: str, cuboids: Sequence[Sequence[str]], *, epsilon: Optional[float] = None,
                 rho: Optional[float] = None, delta: Optional[float] = None,
                 weights: Optional[Sequence[float]] = None, split: Optional[str] = None,
                 integer: bool = False, nonneg: bool = False,
                 idempotency_key: Optional[str] = None) -> Answer:
        """Several tables released together under one ``epsilon`` (or
        ``rho``), all consistent with each other and with the invariants."""
        if isinstance(cuboids, (str, bytes)):
            raise TypeError("cuboids: a list of cuboids, each a list of dimension names")
        req: Dict[str, Any] = {"kind": "cuboid",
                               "cuboids": [_names(c, f"cuboids[{i}]") for i, c in enumerate(cuboids)]}
        _budget_fields(req, epsilon, rho, delta)
        if weights is not None:
            req["weights"] = list(weights)
        if split is not None:
            req["split"] = split
        if integer:
            req["integer"] = True
        if nonneg:
            req["nonneg"] = True
        return self.query(dataset, req, idempotency_key=idempotency_key)

    def linear(self, dataset: str, queries: Sequence[Mapping[str, Any]], *, epsilon: float,
               refine: bool = False, idempotency_key: Optional[str] = None) -> Answer:
        """Linear counting queries, each ``{"terms": [{"where": {dim: [values]},
        "coef": 1}, ...]}`` (the sum of coef x the number of matching rows).
        Charged what they add to your Protocol 1 loss: at most ``epsilon``."""
        req: Dict[str, Any] = {"kind": "linear", "epsilon": epsilon, "queries": list(queries)}
        if refine:
            req["refine"] = True
        return self.query(dataset, req, idempotency_key=idempotency_key)

    def prior(self, dataset: str, query: Mapping[str, Any], *, prior: Mapping[str, Any], epsilon: float,
              fraction: bool = False, alpha_u: Optional[float] = None,
              idempotency_key: Optional[str] = None) -> Answer:
        """One linear query refined with your prior (Protocol 2)."""
        req: Dict[str, Any] = {"kind": "prior", "epsilon": epsilon, "query": dict(query), "prior": dict(prior)}
        if fraction:
            req["fraction"] = True
        if alpha_u is not None:
            req["alpha_u"] = alpha_u
        return self.query(dataset, req, idempotency_key=idempotency_key)

    def dx(self, dataset: str, queries: Sequence[Mapping[str, Any]], *, epsilon: float,
           strategy: Optional[str] = None, idempotency_key: Optional[str] = None) -> Answer:
        """d_X-private answers to linear queries under the dataset's metric."""
        req: Dict[str, Any] = {"kind": "dx", "epsilon": epsilon, "queries": list(queries)}
        if strategy is not None:
            req["strategy"] = strategy
        return self.query(dataset, req, idempotency_key=idempotency_key)

    def history(self, dataset: str, *, limit: Optional[int] = None, before: Optional[int] = None) -> List[Answer]:
        """Your answered queries on the dataset, newest first."""
        r = self._get(f"/v1/datasets/{self._seg(dataset)}/queries", limit=limit, before=before)
        return [Answer(q, self) for q in r.get("queries", [])]

    def get_query(self, query_id: str) -> Answer:
        """One of your answered queries, by id."""
        return Answer(self._get("/v1/queries/" + self._seg(query_id)), self)

    def _domains(self, dataset: str) -> Dict[str, List[str]]:
        if dataset not in self._domain_cache:
            ds = self.dataset(dataset)
            self._domain_cache[dataset] = {d["name"]: list(d["values"]) for d in ds.get("dimensions", [])}
        return self._domain_cache[dataset]

    # --- curators (admin key) ---

    def register_dataset(self, id: str, *, schema: Mapping[str, Any], source: Mapping[str, Any],
                         policy: Mapping[str, Any], name: Optional[str] = None) -> Dict[str, Any]:
        """Register a dataset (admin key): its ``schema`` (every domain
        declared), its ``source`` (``{"csv": "file.csv"}`` inside the server's
        ``--source-dir``, or ``{"sql": {...}}``) and ``policy``
        (``{"epsilon_per_analyst": 2, "invariants": [["year"]]}``). The server
        counts the source once, now."""
        body: Dict[str, Any] = {"id": id, "schema": dict(schema), "source": dict(source), "policy": dict(policy)}
        if name is not None:
            body["name"] = name
        return self._request("POST", "/admin/v1/datasets", body=body)

    def create_analyst(self, name: str) -> Dict[str, Any]:
        """Create an analyst (admin key); the result's ``api_key`` is shown only now."""
        return self._request("POST", "/admin/v1/analysts", body={"name": name})

    def issue_key(self, analyst_id: str) -> Dict[str, Any]:
        """Issue another key to an analyst (admin key); ``api_key`` is shown only now."""
        return self._request("POST", f"/admin/v1/analysts/{self._seg(analyst_id)}/keys", body={})

    def revoke_key(self, key_id: str) -> Dict[str, Any]:
        """Revoke a key by its id (the 16 hex digits after ``kdp_``) (admin key)."""
        return self._request("DELETE", "/admin/v1/keys/" + self._seg(key_id))

    def admin_datasets(self) -> List[Dict[str, Any]]:
        """Every dataset with its source, policy and spending (admin key)."""
        return self._get("/admin/v1/datasets").get("datasets", [])

    def admin_dataset(self, dataset: str) -> Dict[str, Any]:
        """One dataset with its source, policy and spending (admin key)."""
        return self._get("/admin/v1/datasets/" + self._seg(dataset))

    def analysts(self) -> List[Dict[str, Any]]:
        """The analysts with their keys and budgets (admin key)."""
        return self._get("/admin/v1/analysts").get("analysts", [])

    def admin_queries(self, *, limit: Optional[int] = None, before: Optional[int] = None,
                      analyst: Optional[str] = None, dataset: Optional[str] = None) -> List[Dict[str, Any]]:
        """Recent answered queries of every analyst (admin key)."""
        return self._get("/admin/v1/queries", limit=limit, before=before, analyst=analyst,
                         dataset=dataset).get("queries", [])

    def admin_keys(self) -> Any:
        """The admin keys (admin key)."""
        return self._get("/admin/v1/admin-keys")

    def issue_admin_key(self) -> Dict[str, Any]:
        """Issue another admin key, shown only now (admin key)."""
        return self._request("POST", "/admin/v1/admin-keys", body={})


def _names(c: Any, what: str) -> List[str]:
    if isinstance(c, (str, bytes)) or not isinstance(c, (list, tuple)):
        raise TypeError(f"{what}: {c!r} is not a list of dimension names (such as [\"year\", \"sex\"])")
    return [str(d) for d in c]


def _budget_fields(req: Dict[str, Any], epsilon: Optional[float], rho: Optional[float],
                   delta: Optional[float]) -> None:
    if epsilon is not None:
        req["epsilon"] = epsilon
    if rho is not None:
        req["mechanism"] = "gaussian"
        req["rho"] = rho
    if delta is not None:
        req["delta"] = delta


def _server_error(e: urllib.error.HTTPError, idem: Optional[str]) -> ServerError:
    """The server's {"error": {"code", "message"}} as an exception."""
    try:
        raw = e.read()
    except OSError:
        raw = b""
    code, message = f"http_{e.code}", (raw[:200].decode("utf-8", "replace") or str(e.reason))
    try:
        body = json.loads(raw.decode("utf-8"))
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            code = str(err.get("code", code))
            message = str(err.get("message", message))
    except ValueError:
        pass
    retry: Optional[float] = None
    ra = e.headers.get("Retry-After") if e.headers else None
    if ra:
        try:
            retry = float(ra)
        except ValueError:
            retry = None
    cls = InsufficientBudgetError if code == "insufficient_budget" else ServerError
    return cls(e.code, code, message, retry, idem)
