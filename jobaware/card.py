"""The job card: one answer per job, one part per capability whose registration declares a card part.

The card names no capability. It asks every registered `CardPart` (`jobaware.capabilities.CardPart`) in registry
order with the same context, and everything the scheduler side says about a job is made of what the parts say:
the comment an adapter writes (`short`), the verdict cache's lines and the advice `cli_filter.lua` prints
(`words`, `advice`), the table of `jobaware card` (`table`) and the `/card` gateway's answer (`make_card`).

The context is a plain dict the caller fills; a part reads what it needs and raises `NotApplicable` without it:
  job_id            the job's id
  job               its record: an squeue --json record or a canonical row (what failure's /predict takes)
  script            its batch script, or None
  queue             the other jobs around it, pending and running, as squeue --json records ([] when unknown)
  similarity_jobid  its id in the similarity pool, or None
  neighbours        jobs it may share a node with: each {"id", and what is known of it: "class" (its binding
                    resource, as the gateway takes it) or "parts" (its card's parts, as an adapter's pass has them)}

A part is a dict: `status` (`ok`, `not_applicable`, `unavailable`, `refused`, `error`), `reason` (why it is not
ok), and, answered, the part's own fields (`model_version` among them). A part whose service is down, slow or
refuses says so instead of failing the card; a part whose code raises is an `error` part, logged.

The history says what a job store knows of jobs like this one (empty without a store): `similar`, the records
(`row`, `states`, `final`) of finished jobs of the same user, account, partition and request shape, newest first;
`site`, how many finished jobs of the cluster ended in each state.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from jobaware import capabilities, config, identity
from jobaware.audit import append, stamp
from jobaware.capabilities import CardPart
from jobaware.text import redacted

log = logging.getLogger(__name__)
MARK = "jobaware: "  # every text the scheduler side writes starts with it
SHORT_MAX = 200  # characters of the comment line
ANSWERED = ("ok", "not_applicable")  # the other statuses are a part missing
STATUSES = (*ANSWERED, "unavailable", "refused", "error")
NO_HISTORY = {"similar": [], "site": {}}
MAX_DEPTH = 2  # a part may ask another part (`Asking.part`); that one may not ask on


class NotApplicable(Exception):
    """Raised by a part's `answer`: this job cannot have the part; the message says why."""


class Unproven(Exception):
    """An answer that does not prove it comes from the deployment's service (`jobaware.identity`)."""


class Missing(Exception):
    """Raised by `Asking.post`: the service gave no answer to use (`status`: unavailable, refused or error)."""

    def __init__(self, status: str, reason: str | None, code: int | None = None):
        super().__init__(reason)
        self.status, self.reason, self.code = status, reason, code


@dataclass(frozen=True)
class Reply:
    """A service's reply: `ok` with its JSON `answer`, or `unavailable` / `refused` / `error` and the `reason`."""

    status: str
    answer: dict | None = None
    reason: str | None = None
    code: int | None = None  # the HTTP status, when there was one


SITE_TOKEN = object()  # Services' default token: the site's (`config.service_token()`)


class Services:
    """The capabilities' services over HTTP (`urls` by key): one POST with a timeout; whatever happens, a Reply.
    A capability without a URL here is not deployed: its parts are `unavailable` and it is never asked.

    With a service `token` (by default the site's, `config.service_token()`), every answer must prove that it comes
    from the deployment's own service (`jobaware.identity`): one without a valid proof is `unavailable`, as an outage
    is. Without one (`token=None`, or none configured), answers are taken unverified (`verified` is False)."""

    def __init__(self, urls: dict[str, str], timeout: float = 5.0, token: bytes | None | object = SITE_TOKEN):
        self.urls = dict(urls)
        self.http = httpx.Client(timeout=timeout)
        self.token: bytes | None = config.service_token() if token is SITE_TOKEN else token  # type: ignore[assignment]

    @property
    def verified(self) -> bool:
        """Whether answers are checked to come from the deployment's services."""
        return self.token is not None

    def request(self, method: str, url: str, **kwargs) -> httpx.Response:
        """One request; with a token, a fresh nonce goes with it and the answer must prove itself (`Unproven` if
        not). httpx's errors pass through."""
        if self.token is None:
            return self.http.request(method, url, **kwargs)
        nonce = identity.new_nonce()
        response = self.http.request(method, url, headers={identity.NONCE: nonce}, **kwargs)
        if not identity.proven(self.token, nonce, response.content, response.headers.get(identity.PROOF)):
            raise Unproven(f"{redacted(url)}: {identity.NO_PROOF}")
        return response

    def post(self, key: str, route: str, body: dict) -> Reply:
        if key not in self.urls:
            return Reply("unavailable", reason=f"no {key} service here")
        url = f"{self.urls[key].rstrip('/')}{route}"
        shown = redacted(url)  # a URL may carry the ingress's password: never into a reason a card shows
        try:
            response = self.request("POST", url, json=body)
        except httpx.HTTPError as exc:
            return Reply("unavailable", reason=f"{shown} unreachable: {type(exc).__name__}")
        except Unproven as exc:
            return Reply("unavailable", reason=str(exc))
        code = response.status_code
        if code >= 500 or code == 429:
            return Reply("unavailable", reason=f"{shown}: HTTP {code}", code=code)
        try:
            answer = response.json()
        except ValueError:
            return Reply("error", reason=f"{shown}: HTTP {code}, not JSON", code=code)
        if code != 200:
            message = answer.get("error") if isinstance(answer, dict) else None
            return Reply("refused", reason=f"HTTP {code}: {str(message or answer)[:200]}", code=code)
        if not isinstance(answer, dict):
            return Reply("error", reason=f"{shown}: the answer is not a JSON object", code=code)
        return Reply("ok", answer=answer, code=code)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def service_urls(given: dict[str, str] | None = None) -> dict[str, str]:
    """Where the service of each capability with a card part answers: `given`, else JOBAWARE_<KEY>_URL; a capability
    named by neither is not deployed, and left out (never asked)."""
    urls = {key: (given or {}).get(key) or config.service_url(key) for key in declared()}
    return {key: url for key, url in urls.items() if url}


def declared() -> dict[str, CardPart]:
    """The card parts of the registered capabilities, in registry order."""
    return {key: capability.card for key, capability in capabilities.registry().items() if capability.card}


class Asking:
    """What a part's `answer` is given: its own capability's service (`post`) and the other parts (`part`)."""

    def __init__(self, key: str, services: Services, depth: int = 0):
        self.key, self.services, self.depth = key, services, depth

    def post(self, route: str, body: dict) -> dict:
        """The service's JSON answer to `body` at `route`; `Missing` when there is none (the part then says why)."""
        reply = self.services.post(self.key, route, body)
        if reply.status != "ok":
            raise Missing(reply.status, reply.reason, reply.code)
        return reply.answer

    def part(self, key: str, context: dict) -> dict:
        """Capability `key`'s part for `context` (another job, or this job asked otherwise), with its status."""
        if self.depth + 1 >= MAX_DEPTH:
            return _part("unavailable", f"{self.key} may not ask {key} (parts ask at most {MAX_DEPTH - 1} deep)")
        return part(key, context, self.services, self.depth + 1)


def _part(status: str, reason: str | None = None, **fields) -> dict:
    return {"status": status, "reason": reason, **fields}


def part(key: str, context: dict, services: Services, depth: int = 0) -> dict:
    """Capability `key`'s part of the card for `context`: answered, or the status and reason it is not."""
    declared_part = declared().get(key)
    if declared_part is None:
        return _part("unavailable", f"no registered capability {key!r} has a card part")
    try:
        fields = declared_part.answer(context, Asking(key, services, depth))
        if not isinstance(fields, dict) or {"status", "reason"} & set(fields):
            raise TypeError(f"answer gave {type(fields).__name__}, not a dict of the part's own fields")
    except NotApplicable as exc:
        return _part("not_applicable", str(exc))
    except Missing as exc:
        return _part(exc.status, exc.reason)
    except Exception as exc:  # noqa: BLE001 - a part's fault is that part's error, never the card's
        log.warning("%s part: %s: %s", key, type(exc).__name__, exc)
        return _part("error", f"{type(exc).__name__}: {str(exc)[:200]}")
    return _part("ok", **fields)


def make_card(context: dict, services: Services, *, keys: list[str] | None = None,
              history: dict | None = None, now: float | None = None) -> dict:
    """The card of one job: the part of every capability that declares one (of `keys` only, when given), each
    answered or marked missing with the reason; `short` is its comment line (with the `history` given); `created`
    is `now` (default: the time)."""
    chosen = [key for key in declared() if keys is None or key in keys]
    parts = {key: part(key, context, services) for key in chosen}
    card = {"job_id": context.get("job_id"), "created": time.time() if now is None else now, "parts": parts,
            "missing": [key for key, p in parts.items() if p["status"] not in ANSWERED]}
    card["short"] = short(card, history)
    return card


def _said(key: str, role: str, *args) -> str | None:
    """What capability `key`'s card part says in `role` (`words`, `advice`, `hold`, `shown`); a function that
    fails says nothing (and is logged)."""
    function = getattr(declared().get(key), role, None)
    if function is None:
        return None
    try:
        return function(*args)
    except Exception as exc:  # noqa: BLE001 - a part's fault leaves its words out, never the caller
        log.warning("%s part's %s: %s: %s", key, role, type(exc).__name__, exc)
        return None


def _say(card: dict, role: str, *args) -> list[str]:
    """What every part of `card` says in `role`, in registry order."""
    return [text for key, answer in card["parts"].items() if (text := _said(key, role, answer, *args))]


def words(card: dict, history: dict | None = None) -> list[str]:
    """Each part's words, in registry order."""
    return _say(card, "words", history or NO_HISTORY)


def short(card: dict, history: dict | None = None) -> str:
    """The comment line: `jobaware: failure risk 71%, TIMEOUT likely; 2/3 similar failed; model 4; io-bound`."""
    return (MARK + "; ".join(words(card, history)))[:SHORT_MAX]


def advice(card: dict, history: dict | None = None) -> str:
    """The parts' advice for the user, one sentence each (empty: no advice)."""
    return " ".join(_say(card, "advice", history or NO_HISTORY))


def hold_reasons(card: dict, site_threshold: float | None = None) -> list[str]:
    """Why a policy that holds risky jobs should hold this one (empty: no reason)."""
    return _say(card, "hold", site_threshold)


def flagged(card: dict, history: dict | None = None, site_threshold: float | None = None) -> list[str]:
    """The capabilities whose part flags the job: advice for its user, or a reason to hold it."""
    history = history or NO_HISTORY
    return [key for key, answer in card["parts"].items()
            if _said(key, "advice", answer, history) or _said(key, "hold", answer, site_threshold)]


def table(card: dict) -> list[dict]:
    """`jobaware card`'s rows: each part, its status, its answer in short (or why there is none), its version."""
    rows = []
    for key, answer in card["parts"].items():
        text = (_said(key, "shown", answer) if answer["status"] == "ok" else answer.get("reason")) or ""
        rows.append({"part": key, "status": answer["status"], "answer": text,
                     "model version": answer.get("model_version") or ""})
    return rows


def versions(card: dict) -> dict[str, str]:
    """The model version of every part that has one."""
    return {key: str(p["model_version"]) for key, p in card["parts"].items() if p.get("model_version")}


def audit(card: dict, path: str | Path) -> None:
    """One audit record for a card given: who, when, the job, its short form, the parts missing, the versions."""
    append(path, stamp({"action": "card", "job_id": card["job_id"], "short": card["short"],
                        "missing": card["missing"], "versions": versions(card)}))


# ---------------------------------------------------------------- cards kept in a job store
def kept(card: dict, **extra) -> dict:
    """What an adapter keeps in the job store for a verdict (`put_prediction`): the card, and `extra` (its acts)."""
    return {"card": card, **extra}


def kept_cards(predictions: dict[str, dict], prefix: str = "") -> list[dict]:
    """The cards kept among a job's predictions (those whose name starts with `prefix`), oldest first (by
    `created`; the last is the newest)."""
    found = [answer["card"] for name, answer in predictions.items()
             if name.startswith(prefix) and isinstance(answer, dict) and isinstance(answer.get("card"), dict)]
    return sorted(found, key=lambda card: card.get("created") or 0)


def said(predictions: dict[str, dict], key: str) -> list[dict]:
    """The answered parts of capability `key` in the cards kept for a job, oldest first."""
    return [card["parts"][key] for card in kept_cards(predictions)
            if (card.get("parts") or {}).get(key, {}).get("status") == "ok"]
