"""A real SMTP server on loopback for the tests (aiosmtpd): it keeps every mail it takes, or refuses recipients."""

from __future__ import annotations

import contextlib
import email
import email.policy
import time
from collections.abc import Iterator
from email.message import Message

from aiosmtpd.controller import Controller

from tests.conftest import free_port


class Inbox:
    """aiosmtpd's handler: the mails taken (parsed), or a refusal of every recipient with `refuse` (an SMTP reply)."""

    def __init__(self, refuse: str | None = None):
        self.mails: list[Message] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.refuse = refuse

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.refuse:
            return self.refuse
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.mails.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 Message accepted for delivery"

    def wait(self, count: int, seconds: float = 60.0) -> list[Message]:
        deadline = time.monotonic() + seconds
        while len(self.mails) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.mails


@contextlib.contextmanager
def smtp_server(port: int | None = None, refuse: str | None = None) -> Iterator[tuple[Inbox, int]]:
    """(the inbox, the port) of an SMTP server on 127.0.0.1 while the block runs."""
    inbox, port = Inbox(refuse), port or free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield inbox, port
    finally:
        controller.stop()
