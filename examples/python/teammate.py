"""A mesh teammate in Python, written only from PROTOCOL.md and mesh.proto.

It joins, streams its inbox (resuming from the last envelope it processed when
the stream or the lead goes away), submits a plan, revises it once if it is
rejected, reports idle, and answers a shutdown request. Given several leads on
one database (--lead repeated, or comma-separated), it talks to the active one:
a standby answers UNAVAILABLE naming the active lead in the `mesh-leader`
metadata, and the call goes there at once.

    python teammate.py --lead 127.0.0.1:7447 --name py --stubs gen
    python teammate.py --lead https://mesh.example:7447 --ca ca.pem --name py
    python teammate.py --lead http://10.0.0.1:7447,http://10.0.0.2:7447 --name py
    (join token from --join-token or MESH_JOIN_TOKEN)
"""
import argparse
import os
import queue
import random
import sys
import threading
import time
import uuid


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lead", required=True, action="append",
                   help="HOST:PORT of the lead (plain text), or https://HOST:PORT (TLS); several leads "
                        "on one database: each (repeated, or comma-separated)")
    p.add_argument("--ca", help="for https: the CA certificate (PEM) to trust; default the system's")
    p.add_argument("--cert", help="for a lead with --client-ca: this client's certificate (PEM)")
    p.add_argument("--key", help="the private key of --cert (PEM)")
    p.add_argument("--name", required=True)
    p.add_argument("--role", default="python")
    p.add_argument("--join-token", default=os.environ.get("MESH_JOIN_TOKEN", ""))
    p.add_argument("--stubs", default="gen", help="directory of the generated stubs")
    p.add_argument("--refuse-shutdown", action="store_true", help="say no to shutdown requests")
    p.add_argument("--lead-gone-limit", type=float, default=60.0,
                   help="seconds the lead may be unreachable before giving up")
    return p.parse_args()


args = parse_args()
sys.path.insert(0, os.path.abspath(args.stubs))

import grpc  # noqa: E402
from mesh.v1 import mesh_pb2 as pb  # noqa: E402
from mesh.v1 import mesh_pb2_grpc as rpc  # noqa: E402

TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED)
LEADER_KEY = "mesh-leader"


def say(*words):
    print(f"[{args.name}]", *words, flush=True)


def auth(token):
    return (("authorization", f"Bearer {token}"),)


class Leads:
    """The leads given; calls go to the current one. A standby's answer
    (UNAVAILABLE with mesh-leader) moves to the lead it names, at once; a lead
    that cannot be reached moves to the next address given, after a backoff."""

    def __init__(self, urls):
        self.urls = urls
        self.next = 1 % len(urls)
        self.lock = threading.Lock()
        self.url, self.stub = urls[0], rpc.LeadStub(open_channel(urls[0]))

    def current(self):
        with self.lock:
            return self.url, self.stub

    def failed(self, url, error):
        """After a call to `url` failed with `error`: True to try again at once."""
        named = dict(error.trailing_metadata() or ()).get(LEADER_KEY)
        with self.lock:
            if url != self.url:
                return True  # another call has moved on already
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                return False
            if named and named != url:
                self.move(named)
                return True
            self.move(self.urls[self.next])
            self.next = (self.next + 1) % len(self.urls)
            return False

    def move(self, url):
        if url != self.url:
            say("talking to the lead at", url)
            self.url, self.stub = url, rpc.LeadStub(open_channel(url))


def call(method, request, token):
    """Calls a unary RPC of the active lead, retrying while no lead is
    reachable (capped exponential backoff with jitter, up to
    --lead-gone-limit). Every call here is safe to repeat: request ids are
    chosen by this teammate."""
    delay, since, hops = 0.05, time.monotonic(), 0
    while True:
        url, stub = leads.current()
        try:
            return getattr(stub, method)(request, metadata=auth(token))
        except grpc.RpcError as e:
            if time.monotonic() - since > args.lead_gone_limit:
                raise
            if leads.failed(url, e) and hops < len(leads.urls) + 1:
                hops += 1
                continue
            if e.code() not in TRANSIENT:
                raise
        time.sleep(delay / 2 + random.random() * delay / 2)
        delay, hops = min(delay * 2, 2.0), 0


class Inbox(threading.Thread):
    """Keeps one Inbox stream open and resumes after the last seq it passed on.

    Reconnects with capped exponential backoff and jitter. Envelopes go to a
    queue in seq order; the consumer deduplicates by message_id."""

    def __init__(self, token, limit):
        super().__init__(daemon=True)
        self.token, self.limit = token, limit
        self.queue = queue.Queue()
        self.after_seq = 0
        self.stopped = False
        self.call = None

    def run(self):
        delay, since, hops = 0.05, time.monotonic(), 0
        while not self.stopped:
            url, stub = leads.current()
            try:
                self.call = stub.Inbox(pb.InboxRequest(after_seq=self.after_seq), metadata=auth(self.token))
                for envelope in self.call:
                    delay, since = 0.05, time.monotonic()
                    self.after_seq = max(self.after_seq, envelope.seq)
                    self.queue.put(envelope)
            except grpc.RpcError as e:
                if self.stopped:
                    return
                if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    self.queue.put(e)
                    return
                if leads.failed(url, e) and hops < len(leads.urls) + 1:
                    hops += 1
                    continue
            if time.monotonic() - since > self.limit:
                self.queue.put(TimeoutError("the lead has been unreachable for too long"))
                return
            time.sleep(delay / 2 + random.random() * delay / 2)
            delay, hops = min(delay * 2, 2.0), 0

    def stop(self):
        self.stopped = True
        if self.call is not None:
            self.call.cancel()


def read(path):
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def open_channel(url):
    """Plain text for HOST:PORT or http://, TLS for https:// (grpc.ssl_channel_credentials)."""
    if url.startswith("https://"):
        credentials = grpc.ssl_channel_credentials(
            root_certificates=read(args.ca),
            private_key=read(args.key),
            certificate_chain=read(args.cert),
        )
        return grpc.secure_channel(url[len("https://"):], credentials)
    if args.ca or args.cert or args.key:
        sys.exit("--ca/--cert/--key are for TLS; give --lead https://HOST:PORT")
    return grpc.insecure_channel(url.removeprefix("http://"))


leads = Leads([url.strip() for value in args.lead for url in value.split(",") if url.strip()])


def main():
    joined = call("Join", pb.JoinRequest(name=args.name, role=args.role), args.join_token)
    token = joined.session_token
    say("joined; mode", pb.PermissionMode.Name(joined.grant.mode))
    inbox = Inbox(token, args.lead_gone_limit)
    inbox.start()
    seen = set()

    def next_envelope():
        """The next envelope not seen before; acknowledges it."""
        while True:
            item = inbox.queue.get()
            if isinstance(item, Exception):
                raise item
            if item.message_id in seen:
                continue
            seen.add(item.message_id)
            call("Ack", pb.AckRequest(seq=item.seq), token)
            return item

    def answer_shutdown(request):
        approve = not args.refuse_shutdown
        reason = "python teammate done" if approve else "still busy"
        call("RespondShutdown",
             pb.ShutdownResponse(request_id=request.request_id, approve=approve, reason=reason), token)
        say("shutdown", "agreed" if approve else "refused", request.request_id)
        return approve

    plans = [
        pb.Plan(summary="Add hello.py", files=["hello.py"], steps=["write hello.py"]),
        pb.Plan(summary="Add hello.py with a test", files=["hello.py", "test_hello.py"],
                tests=["test_hello.py"], steps=["write hello.py", "write test_hello.py"]),
    ]
    supersedes = ""
    for plan in plans:
        request_id = str(uuid.uuid4())
        call("SubmitPlan",
             pb.PlanApprovalRequest(request_id=request_id, plan=plan, supersedes=supersedes), token)
        say("submitted plan", request_id, repr(plan.summary))
        while True:
            envelope = next_envelope()
            kind = envelope.WhichOneof("body")
            if kind == "plan_approval_response" and envelope.plan_approval_response.request_id == request_id:
                break
            if kind == "shutdown_request" and answer_shutdown(envelope.shutdown_request):
                return 0
        response = envelope.plan_approval_response
        if response.approve:
            say("plan approved; mode", pb.PermissionMode.Name(response.grant.mode))
            break
        say("plan rejected:", response.feedback)
        supersedes = request_id
    else:
        say("every plan was rejected")

    call("ReportIdle", pb.IdleNotification(reason="plan done"), token)
    say("idle")
    while True:
        envelope = next_envelope()
        kind = envelope.WhichOneof("body")
        if kind == "shutdown_request" and answer_shutdown(envelope.shutdown_request):
            inbox.stop()
            return 0
        if kind == "teammate_terminated":
            say("heard that", envelope.teammate_terminated.name, "terminated")
        elif kind == "text":
            say("message from", envelope.__getattribute__("from"), repr(envelope.text.content))


if __name__ == "__main__":
    sys.exit(main())
