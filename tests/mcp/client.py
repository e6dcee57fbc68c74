"""A real MCP client (the official Python SDK) driving `teammate mcp`.

Started by tests/tests/interop/mcp.rs, which plays the operator against the lead:
this script is the agent. It prints one line per step and fails (exit 1,
a traceback on stderr) at the first check that does not hold.

    python client.py --teammate BIN --lead URL --name N --workspace DIR SCENARIO

SCENARIO is `gate` (plan mode, bad input, rejection, revision, grant,
writes, shutdown), `pending` (a review longer than --review-wait, news in
check_inbox), `tasks` (list, claim, plan for, complete a task), `sandbox`
(run_command under the default sandbox: the granted file is written;
another file, a private file (--secret-file) and a loopback port (--port)
are out of reach) or `close` (connect, list, close stdin).
"""

import argparse
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

READ_TOOLS = {
    "read_file", "list_dir", "search", "send_message", "check_inbox",
    "list_tasks", "claim_task", "complete_task",
}
GATED = {"write_file", "edit_file", "run_command"}


def say(*parts):
    print(*parts, flush=True)


class ToolListChanges:
    """Counts `notifications/tools/list_changed` and lets a step wait for one."""

    def __init__(self):
        self.count = 0
        self.event = anyio.Event()

    async def handle(self, message):
        message = getattr(message, "root", message)
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.count += 1
            fired, self.event = self.event, anyio.Event()
            fired.set()

    async def wait_for(self, count, what):
        with anyio.fail_after(30):
            while self.count < count:
                await self.event.wait()
        say(f"list_changed #{count}: {what}")


async def names(session):
    return {tool.name for tool in (await session.list_tools()).tools}


async def call(session, name, arguments, *, error):
    """Calls a tool and checks whether it is an error result; returns its text."""
    result = await session.call_tool(name, arguments)
    text = "\n".join(block.text for block in result.content if block.type == "text")
    assert bool(result.is_error) == error, f"{name}: is_error={result.is_error}: {text}"
    say(f"{name} -> {'error' if error else 'ok'}: {text.splitlines()[0] if text else ''}")
    return text


async def gate(session, changes, workspace):
    init_tools = await names(session)
    assert init_tools == READ_TOOLS | {"submit_plan"}, init_tools

    # Plan mode: a gated tool is an error result, reported, and writes nothing.
    text = await call(session, "write_file", {"path": "src/lib.rs", "content": "x"}, error=True)
    assert "not available in plan mode" in text and "submit_plan" in text, text
    assert not os.path.exists(os.path.join(workspace, "src/lib.rs"))

    # Bad input: error results, never a crash.
    text = await call(session, "delete_everything", {}, error=True)
    assert "no tool" in text, text
    text = await call(session, "read_file", {"path": 3}, error=True)
    assert "do not fit" in text, text
    text = await call(session, "read_file", {}, error=True)
    assert "path" in text, text
    await call(session, "read_file", {"path": "../outside.txt"}, error=True)
    await call(session, "read_file", {"path": "/etc/passwd"}, error=True)
    text = await call(session, "submit_plan", {"summary": "x" * (9 << 20)}, error=True)
    assert "bytes" in text, text
    await call(session, "respond_shutdown", {"approve": True, "reason": "no"}, error=True)
    text = await call(session, "read_file", {"path": "README.md"}, error=False)
    assert "the workspace" in text, text

    # The first plan is rejected by the operator; the feedback comes back.
    plan = {
        "summary": "add a parser",
        "steps": ["write src/lib.rs"],
        "files": ["src/**"],
        "tests": [],
    }
    text = await call(session, "submit_plan", plan, error=False)
    assert "rejected" in text and "add a test for the parser" in text, text
    assert "submit_plan" in await names(session)

    # The revision is approved: the grant comes back and the tools change.
    plan["tests"] = ["cargo test parser"]
    text = await call(session, "submit_plan", plan, error=False)
    assert "approved" in text and "src/**" in text, text
    await changes.wait_for(1, "the grant's tools")
    tools = await names(session)
    assert GATED <= tools and "submit_plan" not in tools, tools

    text = await call(session, "write_file", {"path": "src/lib.rs", "content": "pub fn parse() {}\n"}, error=False)
    with open(os.path.join(workspace, "src/lib.rs")) as f:
        assert f.read() == "pub fn parse() {}\n"
    text = await call(session, "write_file", {"path": "notes.txt", "content": "outside"}, error=True)
    assert not os.path.exists(os.path.join(workspace, "notes.txt"))
    say("WROTE")

    # The operator asks for a shutdown: respond_shutdown appears.
    await changes.wait_for(2, "respond_shutdown listed")
    assert "respond_shutdown" in await names(session)
    text = await call(session, "check_inbox", {}, error=False)
    assert "shutdown request" in text and "test over" in text, text
    text = await call(session, "respond_shutdown", {"approve": True, "reason": "done"}, error=False)
    assert "agreed" in text, text
    assert await names(session) == {"check_inbox"}
    text = await call(session, "read_file", {"path": "README.md"}, error=True)
    assert "left the team" in text, text
    text = await call(session, "check_inbox", {}, error=False)
    assert "left the team" in text, text
    say("DONE")


async def pending(session, changes, workspace):
    text = await call(session, "send_message", {"to": "witness", "text": "hello from the agent"}, error=False)
    plan = {"summary": "fix the parser", "steps": ["edit"], "files": ["src/**"], "tests": ["t"]}
    text = await call(session, "submit_plan", plan, error=False)
    assert "still pending" in text and "check_inbox" in text, text
    text = await call(session, "submit_plan", plan, error=True)
    assert "under review" in text, text
    say("PENDING")
    # The operator answers later: the grant changes the tools, and the
    # decision and a message wait in the inbox.
    await changes.wait_for(1, "the late grant's tools")
    text = await call(session, "check_inbox", {}, error=False)
    assert "message from witness: hello back" in text and "plan approved" in text, text
    assert text.index("hello back") < text.index("plan approved"), text
    text = await call(session, "check_inbox", {}, error=False)
    assert "nothing new" in text, text
    await call(session, "write_file", {"path": "src/fix.rs", "content": "// fixed\n"}, error=False)
    say("DONE")


async def tasks(session, changes, workspace):
    text = await call(session, "list_tasks", {}, error=False)
    assert "[pending] write the parser" in text, text
    text = await call(session, "complete_task", {"task_id": "nope", "summary": "x"}, error=True)
    assert "no task" in text, text
    text = await call(session, "claim_task", {}, error=False)
    assert "claimed: task" in text and "write the parser" in text, text
    task_id = text.split()[2]
    plan = {"summary": "the parser", "steps": ["write it"], "files": ["src/parser.rs"], "tests": ["t"]}
    text = await call(session, "submit_plan", plan, error=False)
    assert "approved" in text, text
    await call(session, "write_file", {"path": "src/parser.rs", "content": "// parser\n"}, error=False)
    text = await call(session, "complete_task", {"task_id": task_id, "summary": "parser written"}, error=False)
    assert "[completed]" in text and "parser written" in text, text
    say("DONE")


async def sandbox(session, changes, workspace, secret_file, port):
    plan = {"summary": "try the sandbox", "steps": ["run commands"], "files": ["granted.txt"], "tests": []}
    text = await call(session, "submit_plan", plan, error=False)
    assert "approved" in text, text
    await changes.wait_for(1, "the grant's tools")
    assert "run_command" in await names(session)
    await call(session, "run_command", {"command": "echo hi > granted.txt && python3 -c 'print(6 * 7)'"}, error=False)
    with open(os.path.join(workspace, "granted.txt")) as f:
        assert f.read() == "hi\n"
    await call(session, "run_command", {"command": "echo x > other.txt"}, error=True)
    assert not os.path.exists(os.path.join(workspace, "other.txt"))
    text = await call(session, "run_command", {"command": f"cat {secret_file}"}, error=True)
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    await call(session, "run_command", {"command": f'python3 -c "{connect}"'}, error=True)
    say("DONE")


async def close(session, changes, workspace):
    assert await names(session) == READ_TOOLS | {"submit_plan"}
    say("CLOSING")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--teammate", required=True)
    parser.add_argument("--lead", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--secret-file", default="")
    parser.add_argument("--port", default="0")
    parser.add_argument("scenario", choices=["gate", "pending", "tasks", "sandbox", "close"])
    args = parser.parse_args()
    server = StdioServerParameters(
        command=args.teammate,
        args=["mcp", "--lead", args.lead, "--name", args.name, "--workspace", args.workspace, "--review-wait", "1" if args.scenario == "pending" else "30"],
        env={"MESH_JOIN_TOKEN": os.environ["MESH_JOIN_TOKEN"], "RUST_LOG": "warn"}
        | {k: v for k, v in os.environ.items() if k == "OTEL_EXPORTER_OTLP_ENDPOINT"},
    )
    changes = ToolListChanges()
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=changes.handle) as session:
            init = await session.initialize()
            assert init.capabilities.tools is not None and init.capabilities.tools.list_changed, init
            say(f"initialized: {init.server_info.name}")
            if args.scenario == "sandbox":
                await sandbox(session, changes, args.workspace, args.secret_file, args.port)
            else:
                await {"gate": gate, "pending": pending, "tasks": tasks, "close": close}[args.scenario](session, changes, args.workspace)
    say("CLOSED")


if __name__ == "__main__":
    anyio.run(main)
    sys.exit(0)
