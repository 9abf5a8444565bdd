"""One client for midtrace's numbers: over HTTP from a running collector, or from a store.

``open_client(url=...)`` reads through the collector's query API (docs/query-api.md);
``open_client(db=...)`` opens a store read-only: a DuckDB file, which works only while no
collector holds it, or a ClickHouse store (a ClickHouseURL, or its URL as text). All run the
same SQL (collector/query/reads.py; the HTTP API runs it server side), so they return the
same frames.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.ipc

from midtrace.collector.query import reads
from midtrace.collector.query.reads import NO_EXPERIMENT, Filters, QueryError
from midtrace.collector.settings import ClickHouseURL, SettingsError, parse_store
from midtrace.sql import sqlfiles

__all__ = ["NO_EXPERIMENT", "ClickHouseClient", "Client", "ClientError", "Filters", "FileClient",
           "HttpClient", "QueryError", "ReadOnlyError", "SourceError", "open_client"]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
T = TypeVar("T")


class ClientError(Exception):
    """A read failed; the message says why."""


class SourceError(ClientError):
    """The source (collector or file) cannot be read at all."""


class ReadOnlyError(ClientError):
    """The client cannot write (a file opened read-only)."""


class Client(Protocol):
    read_only: bool

    def view(self, name: str, filters: Filters = Filters(),
             group_by: Sequence[str] = ()) -> pd.DataFrame: ...

    def requests(self, filters: Filters = Filters(), search: str | None = None,
                 taxonomy_class: str | None = None, limit: int = 50,
                 offset: int = 0) -> pd.DataFrame: ...

    def requests_page(self, filters: Filters = Filters(), search: str | None = None,
                      taxonomy_class: str | None = None, limit: int = 50,
                      offset: int = 0) -> tuple[pd.DataFrame, int]: ...

    def trace(self, trace_id: str) -> dict[str, Any] | None: ...

    def prompts(self, trace_id: str) -> list[str]: ...

    def request_texts(self, filters: Filters = Filters(), limit: int = 500,
                      offset: int = 0) -> pa.Table: ...

    def facets(self) -> dict[str, Any]: ...

    def settings(self) -> dict[str, float]: ...

    def post_outcome(self, outcome: dict[str, Any]) -> dict[str, Any]: ...

    def views(self) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


def to_frame(table: pa.Table) -> pd.DataFrame:
    """The one Arrow -> pandas conversion both backends use."""
    return table.to_pandas()


class _Backend:
    """What both backends share: the request list as a plain frame, and ``with`` support."""

    def requests_page(self, filters: Filters, search: str | None, taxonomy_class: str | None,
                      limit: int, offset: int) -> tuple[pd.DataFrame, int]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def requests(self, filters: Filters = Filters(), search: str | None = None,
                 taxonomy_class: str | None = None, limit: int = 50,
                 offset: int = 0) -> pd.DataFrame:
        return self.requests_page(filters, search, taxonomy_class, limit, offset)[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _StoreClient(_Backend):
    """Reads a store opened read-only, running collector/query/reads.py on a reader of it."""

    read_only = True
    last_total: int | None = None

    def _read(self, fn: Callable[[Any], T]) -> T:
        raise NotImplementedError

    def view(self, name: str, filters: Filters = Filters(),
             group_by: Sequence[str] = ()) -> pd.DataFrame:
        return to_frame(self._read(lambda db: reads.run_view(db, name, filters, group_by)))

    def views(self) -> list[dict[str, Any]]:
        return [{"name": v.name, "description": v.description, "keys": list(v.keys)}
                for v in reads.metric_views().values()]

    def requests_page(self, filters: Filters = Filters(), search: str | None = None,
                      taxonomy_class: str | None = None, limit: int = 50,
                      offset: int = 0) -> tuple[pd.DataFrame, int]:
        """A page of requests and how many match in all (also kept in ``last_total``)."""
        table, total = self._read(lambda db: reads.run_requests(
            db, filters, search, taxonomy_class, limit, offset))
        self.last_total = total
        return to_frame(table), total

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        return self._read(lambda db: reads.run_trace(db, trace_id))

    def request_texts(self, filters: Filters = Filters(), limit: int = 500,
                      offset: int = 0) -> pa.Table:
        """A page of requests with question, answer and chunk texts (reads.run_request_texts)."""
        return self._read(lambda db: reads.run_request_texts(db, filters, limit, offset))

    def prompts(self, trace_id: str) -> list[str]:
        """The prompt texts the trace's LLM spans carried, the last call first
        (reads.run_trace_prompts)."""
        return self._read(lambda db: reads.run_trace_prompts(db, trace_id))

    def facets(self) -> dict[str, Any]:
        return self._read(reads.run_facets)

    def settings(self) -> dict[str, float]:
        """The settings the metric views apply (band thresholds, min_n, high_confidence)."""
        return dict(self._read(reads.run_settings)["settings"])


class FileClient(_StoreClient):
    """Reads a midtrace DuckDB file opened read-only."""

    def __init__(self, path: str | Path) -> None:
        from midtrace.collector.storage.store import (
            StoreError, forbid_external_access, open_read_only)

        path = Path(path)
        if not path.exists():
            raise SourceError(f"{path} does not exist")
        try:
            self.conn = open_read_only(path)
        except StoreError as e:
            raise SourceError(str(e)) from e
        # Nothing here reads files or the network; a database-wide guard against that.
        forbid_external_access(self.conn)
        self.path = path
        self.last_total = None

    def _read(self, fn: Callable[[Any], T]) -> T:
        """``fn`` on a reader of its own cursor; a DuckDB error (a damaged block, say) as a
        SourceError that says what to do."""
        import duckdb

        from midtrace.collector.storage.database import describe

        try:
            cur = reads.read_cursor(self.conn)
            try:
                return fn(cur)
            finally:
                cur.close()
        except duckdb.Error as e:
            raise SourceError(str(describe(self.path, e))) from e

    def post_outcome(self, outcome: dict[str, Any]) -> dict[str, Any]:
        raise ReadOnlyError("opened read-only from a file; grade through a running collector")

    def close(self) -> None:
        self.conn.close()


class ClickHouseClient(_StoreClient):
    """Reads a midtrace ClickHouse store (docs/architecture.md, "Two engines"): a server, or a
    chdb folder in this process. Read-only: grades go through a running collector."""

    def __init__(self, url: ClickHouseURL) -> None:
        from midtrace.collector.storage import clickhouse

        try:
            self.conn = clickhouse.connect(url)
        except clickhouse.StoreError as e:
            raise SourceError(str(e)) from None
        self.url = url
        self.last_total = None
        self.reader = reads.reader(self.conn)
        present = {name for (name,) in self._read(lambda db: db.rows(
            sqlfiles.query("store_tables", engine=db.engine)))}
        missing = [name for name in STORE_TABLES if name not in present]
        if missing:
            more = f" (nor {len(missing) - 1} more of midtrace's)" if len(missing) > 1 else ""
            raise SourceError(f"{url} is not a midtrace store: its database {url.database} "
                              f"has no table or view {missing[0]}{more}")

    def _read(self, fn: Callable[[Any], T]) -> T:
        """``fn`` on the store's reader; a ClickHouse error (the server gone, a table
        missing) as a SourceError naming the store, in one line."""
        from clickhouse_connect.driver.exceptions import Error

        try:
            return fn(self.reader)
        except Error as e:
            raise SourceError(f"{self.url}: {_first_line(e)}") from None

    def post_outcome(self, outcome: dict[str, Any]) -> dict[str, Any]:
        raise ReadOnlyError("a ClickHouse store is opened read-only; grade through a running "
                            "collector")

    def close(self) -> None:
        self.conn.close()


# What a ClickHouse store must hold for every read: the tables the reads join and the views.
STORE_TABLES = ("requests", "chunks", "placements", "outcomes", "request_evidence",
                "request_facts", *sorted(reads.metric_views()))


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


class HttpClient(_Backend):
    """Reads through a running collector's query API."""

    read_only = False

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0,
                 fresh: bool = False) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self.last_total: int | None = None
        # fresh: every read first waits until what the collector acknowledged is derived.
        self.fresh = fresh

    def _get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        if self.fresh:
            params = {**(params or {}), "fresh": "1"}
        try:
            response = self.http.get(path, params=params)
        except httpx.HTTPError as e:
            raise SourceError(f"cannot reach the collector at {self.url}: {e}") from e
        self._check(response)
        return response

    def _check(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        try:
            message = response.json().get("error") or response.text
        except ValueError:
            message = response.text
        if response.status_code == 400:
            raise QueryError(message)
        if response.status_code in (401, 403):
            raise SourceError(f"the collector at {self.url} refused the token: {message}")
        raise ClientError(f"{response.request.method} {response.request.url.path} answered "
                          f"{response.status_code}: {message}")

    @staticmethod
    def _arrow(response: httpx.Response) -> pa.Table:
        return pyarrow.ipc.open_stream(io.BytesIO(response.content)).read_all()

    def view(self, name: str, filters: Filters = Filters(),
             group_by: Sequence[str] = ()) -> pd.DataFrame:
        params: dict[str, Any] = {**filters.to_params(), "format": "arrow"}
        if group_by:
            params["group_by"] = ",".join(group_by)
        return to_frame(self._arrow(self._get(f"/api/v1/views/{name}", params)))

    def views(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/views").json()["views"])

    def requests_page(self, filters: Filters = Filters(), search: str | None = None,
                      taxonomy_class: str | None = None, limit: int = 50,
                      offset: int = 0) -> tuple[pd.DataFrame, int]:
        """A page of requests and how many match in all (also kept in ``last_total``)."""
        params: dict[str, Any] = {**filters.to_params(), "limit": limit, "offset": offset,
                                  "format": "arrow"}
        if search:
            params["q"] = search
        if taxonomy_class is not None:
            params["class"] = taxonomy_class
        response = self._get("/api/v1/requests", params)
        self.last_total = int(response.headers.get("x-total-count", "0"))
        return to_frame(self._arrow(response)), self.last_total

    def request_texts(self, filters: Filters = Filters(), limit: int = 500,
                      offset: int = 0) -> pa.Table:
        """A page of requests with question, answer and chunk texts (reads.run_request_texts)."""
        params: dict[str, Any] = {**filters.to_params(), "limit": limit, "offset": offset,
                                  "format": "arrow"}
        return self._arrow(self._get("/api/v1/request-texts", params))

    def post_outcomes(self, outcomes: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Post outcomes in the ``/v1/outcomes`` body format in one request; the answer
        ``{"accepted", "rejected", "errors"}``."""
        try:
            response = self.http.post("/v1/outcomes", json={"outcomes": list(outcomes)})
        except httpx.HTTPError as e:
            raise SourceError(f"cannot reach the collector at {self.url}: {e}") from e
        if response.status_code == 400:
            body = response.json()
            errors = body.get("errors") or [{"error": body.get("error")}]
            raise QueryError("; ".join(str(e.get("error")) for e in errors))
        self._check(response)
        return dict(response.json())

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        try:  # not through _get: a 404 here is an answer ("no such request"), not an error
            response = self.http.get(f"/api/v1/traces/{trace_id}",
                                     params={"fresh": "1"} if self.fresh else None)
        except httpx.HTTPError as e:
            raise SourceError(f"cannot reach the collector at {self.url}: {e}") from e
        if response.status_code == 404:
            return None
        self._check(response)
        return dict(response.json())

    def prompts(self, trace_id: str) -> list[str]:
        """The prompt texts the trace's LLM spans carried, the last call first."""
        return list(self._get(f"/api/v1/prompts/{trace_id}").json()["prompts"])

    def facets(self) -> dict[str, Any]:
        return dict(self._get("/api/v1/facets").json())

    def settings(self) -> dict[str, float]:
        """The settings the collector's metric views apply (band thresholds, min_n, ...)."""
        body = self._get("/api/v1/settings").json()
        return {str(k): float(v) for k, v in body["settings"].items()}

    def post_outcome(self, outcome: dict[str, Any]) -> dict[str, Any]:
        return self.post_outcomes([outcome])

    def close(self) -> None:
        self.http.close()



def open_client(url: str | None = None, db: str | Path | ClickHouseURL | None = None,
                token: str | None = None, fresh: bool = False) -> Client:
    """A client for a running collector (``url``) or a store (``db``: a DuckDB file's path, a
    ClickHouseURL, or a store's URL as ``--store`` takes it), not both.

    ``fresh``: reads through a collector first wait until every export it acknowledged is
    derived (a store read directly has nothing pending)."""
    if (url is None) == (db is None):
        raise ValueError("give either url (a running collector) or db (a store)")
    if url is not None:
        return HttpClient(url, token=token, fresh=fresh)
    assert db is not None
    if isinstance(db, str) and "://" in db:
        try:
            db = parse_store(db)
        except SettingsError as e:
            raise SourceError(str(e)) from None
    if isinstance(db, ClickHouseURL):
        return ClickHouseClient(db)
    return FileClient(db)
