"""A recorded fake of the Kubeflow Pipelines REST API (v2beta1), served on loopback: the endpoints `kfp.Client`
calls to create experiments, runs and recurring runs, answering in the shapes the KFP API server returns
(fields as in kfp_server_api's V2beta1Experiment, V2beta1Run and V2beta1RecurringRun). It keeps what was created
and every request, so a test can check what a submit sent. No Kubeflow runs here."""

from __future__ import annotations

import itertools
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API = "/apis/v2beta1"
CREATED_AT = "2026-11-26T12:00:00Z"


class KfpApi:
    def __init__(self):
        self.requests: list[tuple[str, str, dict]] = []
        self.experiments: list[dict] = []
        self.runs: list[dict] = []
        self.recurring_runs: list[dict] = []
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> KfpApi:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def _id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids):04d}-0000-4000-8000-000000000000"

    def answer(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        if method == "GET" and path == f"{API}/healthz":
            return 200, {"commit_sha": "recorded", "tag_name": "2.5.0", "multi_user": False}
        if path == f"{API}/experiments":
            if method == "POST":
                experiment = {**body, "experiment_id": self._id("exp"), "created_at": CREATED_AT,
                              "storage_state": "AVAILABLE", "namespace": body.get("namespace", "")}
                self.experiments.append(experiment)
                return 200, experiment
            found = _filtered(self.experiments, query)
            return 200, {"experiments": found, "total_size": len(found)} if found else {}
        if method == "POST" and path == f"{API}/runs":
            run = {**body, "run_id": self._id("run"), "state": "PENDING", "created_at": CREATED_AT,
                   "storage_state": "AVAILABLE", "service_account": "pipeline-runner"}
            self.runs.append(run)
            return 200, run
        if path == f"{API}/recurringruns":
            if method == "POST":
                recurring = {**body, "recurring_run_id": self._id("rec"), "status": "ENABLED",
                             "created_at": CREATED_AT, "updated_at": CREATED_AT, "namespace": ""}
                self.recurring_runs.append(recurring)
                return 200, recurring
            found = [r for r in _filtered(self.recurring_runs, query)
                     if r.get("experiment_id") == query.get("experiment_id", r.get("experiment_id"))]
            return 200, {"recurringRuns": found, "total_size": len(found)} if found else {}  # the API names it so
        return 404, {"error": f"no route {method} {path}", "code": 5, "message": "Not Found"}

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                url = urllib.parse.urlsplit(self.path)
                query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                api.requests.append((self.command, url.path, body))
                status, answer = api.answer(self.command, url.path, query, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args):
                pass

        return Handler


def _filtered(items: list[dict], query: dict) -> list[dict]:
    """KFP's `filter` query parameter: the display_name EQUALS predicate kfp.Client sends."""
    if "filter" not in query:
        return list(items)
    predicates = json.loads(query["filter"]).get("predicates", [])
    chosen = list(items)
    for predicate in predicates:
        value = predicate.get("stringValue", predicate.get("string_value"))
        chosen = [i for i in chosen if i.get(predicate["key"]) == value]
    return chosen
