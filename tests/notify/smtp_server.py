"""A real SMTP server for the notify tests, on aiosmtpd: it listens on a
free loopback port, prints `listening on PORT` once it serves, and then one
JSON object per line for each message, flushed before the message is
answered: {"mail_from", "rcpt_tos", "subject", "to", "body", "data"}, where
`body` is the text part decoded and `data` the message as it came.

    python smtp_server.py [--defer N]

With --defer N, the first N messages are answered 451 (try again later)
and printed as {"deferred": true, "rcpt_tos"}.
"""

import asyncio
import email
import email.policy
import json
import sys

from aiosmtpd.smtp import SMTP


class Recorder:
    def __init__(self, defer):
        self.defer = defer

    async def handle_DATA(self, server, session, envelope):
        if self.defer > 0:
            self.defer -= 1
            print(json.dumps({"deferred": True, "rcpt_tos": envelope.rcpt_tos}), flush=True)
            return "451 4.3.0 Try again later"
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        body = message.get_body(preferencelist=("plain",))
        print(
            json.dumps(
                {
                    "mail_from": envelope.mail_from,
                    "rcpt_tos": envelope.rcpt_tos,
                    "subject": str(message["subject"]),
                    "to": str(message["to"]),
                    "body": body.get_content() if body is not None else "",
                    "data": envelope.content.decode("utf-8", "replace"),
                }
            ),
            flush=True,
        )
        return "250 OK"


async def main():
    defer = int(sys.argv[sys.argv.index("--defer") + 1]) if "--defer" in sys.argv else 0
    recorder = Recorder(defer)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(recorder, hostname="mesh-test"), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    print(f"listening on {port}", flush=True)
    await server.serve_forever()


asyncio.run(main())
