"""Read deadlines and a connection cap for the services' HTTP server: uvicorn, as BentoML 1.4 runs it.

Neither offers them. uvicorn 0.54 has no deadline for reading a request: its keep-alive timer is armed only after an
answer and cancelled by the first byte of the next request, so a client that sends half a request holds its
connection for ever; its `limit_concurrency` answers 503 only once a request's headers are in (half-sent requests
still pile up, until the process runs out of file descriptors), and BentoML 1.4 passes neither it nor a protocol
class to uvicorn (`_bentoml_impl.worker.service` builds uvicorn's Config itself). So every connection of a service
gets, from `GuardedProtocol`:
- a deadline for its request's headers (`header_s` from the moment it opens, or from the end of the answer before on
  a kept-alive connection) and, once they are in, one more for its body (`body_s`): a connection still reading its
  request then is closed (a connection idle between requests too, as uvicorn's keep-alive would);
- a cap of `max_connections` open connections per server process: one over it closes the connection that has waited
  longest for its request (a half-sent or idle one), or, when every open one is being answered, is itself answered
  503 and closed. A connection whose request is being answered is never cut.

`install()` makes it uvicorn's "auto" HTTP protocol in the process that imports the service (a BentoML worker
imports the service module before it configures uvicorn).
"""

from __future__ import annotations

import json

import uvicorn.config
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from jobaware.serving import observe

REFUSED = json.dumps({"error": "too many connections: try again", "field": None}).encode()


class GuardedProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type] - httptools', or h11's where it is missing
    """uvicorn's HTTP protocol with read deadlines and the connection cap (the class attributes, set by `install`)."""

    header_s: float = 5.0
    body_s: float = 5.0
    max_connections: int = 1024
    service: str = ""  # its name, for the count of connections closed (`jobaware_service_connections_closed_total`)

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._timer, self._since = None, None
        self._body_cycle = None  # the request whose body was given `body_s` (the body deadline is armed once)
        if len(self.connections) > self.max_connections and not self._make_room():
            self._closed("refused")
            transport.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: "
                            + str(len(REFUSED)).encode() + b"\r\nconnection: close\r\n\r\n" + REFUSED)
            transport.close()
            return
        self._await_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_request()

    def connection_lost(self, exc) -> None:
        if getattr(self, "_timer", None) is not None:
            self._timer.cancel()
        super().connection_lost(exc)

    def _await_request(self) -> None:
        """Arm the header deadline: the next request's headers are due within `header_s`."""
        if self._timer is not None:
            self._timer.cancel()
        self._since = self.loop.time()
        self._header_cycle = self.cycle  # a request whose headers came in replaces it
        self._timer = self.loop.call_later(self.header_s, self._expired)

    def reading(self) -> bool:
        """Whether the connection waits for a request, or for the rest of one (not being answered)."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def _expired(self) -> None:
        self._timer = None
        cycle = self.cycle
        if self.transport.is_closing() or not self.reading():
            return  # being answered: the next deadline is armed when the answer is complete
        if cycle is not self._header_cycle and not cycle.response_complete and self._body_cycle is not cycle:
            self._body_cycle = cycle  # the headers came in: the body is due within body_s more
            self._timer = self.loop.call_later(self.body_s, self._expired)
            return
        # no request yet (cycle None, as _body_cycle is then) is a header deadline missed
        body = cycle is not None and cycle is self._body_cycle and not cycle.response_complete
        self._closed("body_timeout" if body else "header_timeout")
        self.transport.close()

    def _make_room(self) -> bool:
        """Close the open connection that has waited longest for its request; False when none waits."""
        open_ = [other for other in self.connections if not other.transport.is_closing()]
        if len(open_) <= self.max_connections:
            return True  # those over the cap are closing already
        waiting = [other for other in open_ if other is not self and getattr(other, "_since", None) is not None
                   and other.reading()]
        if not waiting:
            return False
        min(waiting, key=lambda other: other._since).transport.close()
        self._closed("over_cap")
        return True

    def _closed(self, reason: str) -> None:
        observe.series().service_connections_closed.labels(service=self.service, reason=reason).inc()


def install(header_s: float, body_s: float, max_connections: int, service: str = "") -> None:
    """Make `GuardedProtocol`, with these limits, the HTTP protocol of every uvicorn server this process configures
    with `http="auto"` (BentoML's), for `service`."""
    GuardedProtocol.header_s, GuardedProtocol.body_s = header_s, body_s
    GuardedProtocol.max_connections, GuardedProtocol.service = max_connections, service
    uvicorn.config.HTTP_PROTOCOLS["auto"] = f"{__name__}:GuardedProtocol"
