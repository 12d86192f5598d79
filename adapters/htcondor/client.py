"""The hold service over HTTP: `POST /hold-decision` with a bounded timeout, a few tries with backoff, fail open."""

from __future__ import annotations

import time

import httpx

RETRY_STATUS = (429, 502, 503, 504)


class DecisionClient:
    """Asks `hold` about one held job; an answer, or None and why (the caller then does nothing)."""

    def __init__(self, url: str, timeout: float = 5.0, attempts: int = 3, backoff: float = 0.25):
        self.url = url.rstrip("/") + "/hold-decision"
        self.attempts = attempts
        self.backoff = backoff
        self.http = httpx.Client(timeout=timeout)

    def decide(self, cluster: int, proc: int, subproc: int, log: bytes) -> tuple[dict | None, str | None]:
        body = {"cluster": cluster, "proc": proc, "subproc": subproc, "log": log.decode("utf-8", "replace")}
        error = "not asked"
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = self.http.post(self.url, json=body)
            except httpx.HTTPError as exc:
                error = f"service unreachable: {type(exc).__name__}: {str(exc)[:200]}"
                continue
            if response.status_code == 200:
                try:
                    answer = response.json()
                except ValueError:
                    return None, "service answered 200 without JSON"
                if not isinstance(answer, dict) or "p_release" not in answer:
                    return None, "service answered 200 without p_release"
                return answer, None
            error = f"service answered {response.status_code}: {_message(response)}"
            if response.status_code not in RETRY_STATUS:
                break
        return None, error

    def close(self) -> None:
        self.http.close()


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
        text = body.get("error") or body.get("detail") or body.get("message") or str(body)
    except (ValueError, AttributeError):
        text = response.text
    return str(text)[:300]
