"""Teammates that answer the A2A conformance kit's scenarios (a2a-tck, 1.0-dev).

The kit routes by the messageId of the message that handed a task in, which
mesh keeps as the task's origin (`origin.message_id`). These teammates join a
lead, claim what is handed in and do what the kit's scenarios ask, through
mesh's own calls only:

- `tck-input-required...`: submit a plan for the task, so it waits for the
  caller (INPUT_REQUIRED); when the caller answers (an approval, or any other
  input, which comes back as the plan's feedback), complete the task, unless
  the input is one of the kit's history messages: then wait again;
- `tck-artifact-text|file|file-url|data...`: complete the task with the output
  the scenario names (text, a file, a link, data), which A2A shows as the
  task's first artifact;
- `tck-stream-...`: complete the task with the message's text as an output;
- `tck-message-response...`: complete the task with a reply ("Direct message
  response"), which a blocking SendMessage returns as a Message;
- anything else: complete the task ("Hello from TCK").

A member whose task waits for the caller keeps it; a new member joins to claim
the next one (a member that owns a claimed task hears of no other). A shutdown
request is agreed to at once (that member's thread ends).

    python playbook.py --lead 127.0.0.1:7447 --join-token TOKEN --stubs DIR

DIR holds the mesh stubs (examples/python/gen_stubs.py DIR). It prints
"ready" once its first member has joined, then one line per task.
"""
import argparse
import itertools
import json
import os
import queue
import sys
import threading
import uuid

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--lead", required=True, help="HOST:PORT of the lead (plain text)")
p.add_argument("--join-token", default=os.environ.get("MESH_JOIN_TOKEN", ""))
p.add_argument("--stubs", required=True, help="directory of the generated mesh stubs")
p.add_argument("--name", default="tck", help="members are NAME-1, NAME-2, ...")
args = p.parse_args()
sys.path.insert(0, os.path.abspath(args.stubs))

import grpc  # noqa: E402
from mesh.v1 import mesh_pb2 as pb  # noqa: E402
from mesh.v1 import mesh_pb2_grpc as rpc  # noqa: E402

STUB = rpc.LeadStub(grpc.insecure_channel(args.lead.removeprefix("http://")))
NUMBERS = itertools.count(1)
PRINT = threading.Lock()


def say(*words):
    with PRINT:
        print(*words, flush=True)


def outputs_for(message_id, subject):
    """What the scenario of `message_id` has the task produce: (summary,
    outputs, whether they are a reply)."""
    if message_id.startswith("tck-message-response"):
        return "replied", [pb.TaskOutput(name="reply", text="Direct message response")], True
    if message_id.startswith("tck-artifact-text"):
        return "text", [pb.TaskOutput(name="text", text="Generated text content")], False
    if message_id.startswith("tck-artifact-file-url"):
        return "a link", [pb.TaskOutput(name="output.txt", media_type="text/plain",
                                        url="https://example.com/output.txt")], False
    if message_id.startswith("tck-artifact-file"):
        return "a file", [pb.TaskOutput(name="output.txt", media_type="text/plain", raw=b"tck")], False
    if message_id.startswith("tck-artifact-data"):
        return "data", [pb.TaskOutput(name="data", data_json=json.dumps({"key": "value", "count": 42}))], False
    if message_id.startswith("tck-stream-"):
        return subject, [pb.TaskOutput(name="output", text=subject)], False
    return "Hello from TCK", [], False


class Member:
    """One joined member: its session token and its inbox, read by a thread."""

    def __init__(self):
        self.name = f"{args.name}-{next(NUMBERS)}"
        joined = STUB.Join(pb.JoinRequest(name=self.name, role="tck playbook"),
                           metadata=(("authorization", f"Bearer {args.join_token}"),))
        self.auth = (("authorization", f"Bearer {joined.session_token}"),)
        self.envelopes = queue.Queue()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        try:
            for envelope in STUB.Inbox(pb.InboxRequest(), metadata=self.auth):
                STUB.Ack(pb.AckRequest(seq=envelope.seq), metadata=self.auth)
                self.envelopes.put(envelope)
        except grpc.RpcError as e:
            self.envelopes.put(e)

    def call(self, method, request):
        return getattr(STUB, method)(request, metadata=self.auth)

    def next(self):
        """The next envelope; a shutdown request is agreed to at once."""
        item = self.envelopes.get()
        if isinstance(item, Exception):
            raise item
        if item.WhichOneof("body") == "shutdown_request":
            self.call("RespondShutdown", pb.ShutdownResponse(
                request_id=item.shutdown_request.request_id, approve=True, reason="playbook done"))
            raise SystemExit(0)
        return item

    def complete(self, task, summary, outputs=(), reply=False):
        try:
            self.call("CompleteTask", pb.CompleteTaskRequest(
                task_id=task.task_id, summary=summary, outputs=list(outputs), reply=reply))
            say(self.name, "completed", task.task_id, repr(summary))
        except grpc.RpcError as e:  # withdrawn meanwhile (CancelTask)
            say(self.name, "could not complete", task.task_id, e.code().name, e.details())

    def ask(self, task):
        """Submits a plan for `task`, so that it waits for the caller
        (INPUT_REQUIRED): the plan's request id."""
        request_id = str(uuid.uuid4())
        plan = pb.Plan(summary=f"Ask the caller about: {task.subject}", task_id=task.task_id,
                       steps=["wait for the caller's input", "complete the task"])
        self.call("SubmitPlan", pb.PlanApprovalRequest(request_id=request_id, plan=plan))
        say(self.name, "waits for the caller on", task.task_id)
        return request_id

    def wait_for_the_caller(self, task):
        """Submits a plan for `task` (it waits: INPUT_REQUIRED), then completes
        the task once the plan is decided; a withdrawn task ends the wait.
        The kit's history messages ("TCK history message N", sent to a task
        that is to go on waiting) are heard and the task waits again."""
        request_id = self.ask(task)
        while True:
            envelope = self.next()
            kind = envelope.WhichOneof("body")
            if kind == "plan_approval_response" and envelope.plan_approval_response.request_id == request_id:
                answer = envelope.plan_approval_response
                if answer.approve:
                    self.complete(task, "approved, and done")
                elif answer.feedback.startswith("TCK history message"):
                    say(self.name, "heard:", answer.feedback)
                    request_id = self.ask(task)
                    continue
                else:
                    self.complete(task, f"done, as the caller said: {answer.feedback}")
                break
            if kind == "text" and task.task_id in envelope.text.content:
                say(self.name, "heard:", envelope.text.content)  # withdrawn
                break

    def work(self):
        """Claims and works tasks. A task that waits for its caller is kept
        while a new member takes over the claiming (a member that owns a
        claimed task hears of no other); once it is decided, this one claims
        again."""
        while True:
            try:
                task = self.call("ClaimTask", pb.ClaimTaskRequest())
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                    raise
                self.call("ReportIdle", pb.IdleNotification(reason="nothing to claim"))
                self.next()  # a task claimable, or anything else: look again
                continue
            message_id = task.origin.message_id
            say(self.name, "claimed", task.task_id, repr(message_id))
            if message_id.startswith("tck-input-required"):
                start(Member())
                self.wait_for_the_caller(task)
                continue
            summary, outputs, reply = outputs_for(message_id, task.subject)
            self.complete(task, summary, outputs, reply)


def start(member):
    def run():
        try:
            member.work()
        except grpc.RpcError as e:
            say(member.name, "stopped:", e.code().name, e.details())
            os._exit(1)
    threading.Thread(target=run, daemon=True).start()


def main():
    member = Member()
    say("ready")
    try:
        member.work()
    except grpc.RpcError as e:
        say(member.name, "stopped:", e.code().name, e.details())
        return 1


if __name__ == "__main__":
    sys.exit(main())
