"""An A2A client for the tests, on the official SDK (a2a-sdk): it fetches
the agent card from --card (the lead's console URL), picks its gRPC
interface (or with --binding JSONRPC or HTTP+JSON, that one), and runs one command, printing the answer as JSON (ProtoJSON;
a stream's events one a line, as they come).
A refusal prints {"error": TYPE, "message": ...} and exits 2."""

import argparse
import asyncio
import json
import sys
import uuid

import grpc.aio
from google.protobuf import json_format, struct_pb2
from a2a.client import AuthInterceptor, ClientConfig, ClientFactory, CredentialService
from a2a.types import (
    SubscribeToTaskRequest,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    DeleteTaskPushNotificationConfigRequest,
)


class Token(CredentialService):
    """The bearer token the card's security scheme asks for."""

    def __init__(self, token):
        self.token = token

    async def get_credentials(self, name, context):
        return self.token


def message(text, data, task_id, context_id, message_id=None):
    parts = []
    if text is not None:
        parts.append(Part(text=text))
    if data is not None:
        parts.append(Part(data=json_format.ParseDict(json.loads(data), struct_pb2.Value())))
    return Message(
        message_id=message_id or str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=parts,
        task_id=task_id,
        context_id=context_id,
    )


async def run(args):
    streaming = args.cmd in ("subscribe", "stream")
    config = ClientConfig(
        supported_protocol_bindings=[args.binding],
        streaming=streaming,
        polling=args.immediately,
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    interceptors = [AuthInterceptor(Token(args.token))] if args.token else []
    client = await ClientFactory(config).create_from_url(args.card, interceptors=interceptors)
    try:
        if args.cmd == "send":
            request = SendMessageRequest(
                message=message(args.text, args.data, args.task, args.context, args.message_id)
            )
            if args.push:  # a webhook for the task, as ProtoJSON
                request.configuration.CopyFrom(SendMessageConfiguration(
                    return_immediately=args.immediately,
                    task_push_notification_config=json_format.ParseDict(
                        json.loads(args.push), TaskPushNotificationConfig()),
                ))
            events = [event async for event in client.send_message(request)]
            # A task, or the team's direct reply (a message).
            last = events[-1]
            return getattr(last, last.WhichOneof("payload"))
        if args.cmd == "stream":
            request = SendMessageRequest(message=message(args.text, None, args.task, ""))
            async for event in client.send_message(request):
                print(json.dumps(json_format.MessageToDict(event)), flush=True)
            return None
        if args.cmd == "subscribe":
            async for event in client.subscribe(SubscribeToTaskRequest(id=args.id)):
                print(json.dumps(json_format.MessageToDict(event)), flush=True)
            return None
        if args.cmd == "get":
            request = GetTaskRequest(id=args.id)
            if args.history is not None:
                request.history_length = args.history
            return await client.get_task(request)
        if args.cmd == "list":
            request = ListTasksRequest(context_id=args.context, page_token=args.page_token)
            if args.page_size is not None:
                request.page_size = args.page_size
            return await client.list_tasks(request)
        if args.cmd == "push-create":
            config = json_format.ParseDict(json.loads(args.config), TaskPushNotificationConfig())
            return await client.create_task_push_notification_config(config)
        if args.cmd == "push-get":
            request = GetTaskPushNotificationConfigRequest(task_id=args.task, id=args.id)
            return await client.get_task_push_notification_config(request)
        if args.cmd == "push-list":
            request = ListTaskPushNotificationConfigsRequest(task_id=args.task)
            return await client.list_task_push_notification_configs(request)
        if args.cmd == "push-delete":
            request = DeleteTaskPushNotificationConfigRequest(task_id=args.task, id=args.id)
            await client.delete_task_push_notification_config(request)
            return {"deleted": args.id}
        if args.cmd == "cancel":
            return await client.cancel_task(CancelTaskRequest(id=args.id))
        raise SystemExit(f"unknown command {args.cmd}")
    finally:
        await client.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--card", required=True, help="the URL the agent card is under")
    parser.add_argument("--token", default="")
    parser.add_argument("--immediately", action="store_true", help="returnImmediately")
    parser.add_argument("--binding", default="GRPC", choices=["GRPC", "JSONRPC", "HTTP+JSON"],
                        help="the card's interface to call")
    sub = parser.add_subparsers(dest="cmd", required=True)
    send = sub.add_parser("send")
    send.add_argument("text", nargs="?")
    send.add_argument("--data")
    send.add_argument("--task", default="")
    send.add_argument("--context", default="")
    send.add_argument("--message-id", help="default: a new uuid")
    send.add_argument("--push", help="a TaskPushNotificationConfig (ProtoJSON) for the task")
    push_create = sub.add_parser("push-create", help="CreateTaskPushNotificationConfig")
    push_create.add_argument("config", help="a TaskPushNotificationConfig (ProtoJSON)")
    for name in ("push-get", "push-delete"):
        one = sub.add_parser(name)
        one.add_argument("task")
        one.add_argument("id")
    sub.add_parser("push-list").add_argument("task")
    get = sub.add_parser("get")
    get.add_argument("id")
    get.add_argument("--history", type=int)
    listing = sub.add_parser("list")
    listing.add_argument("--context", default="")
    listing.add_argument("--page-size", type=int)
    listing.add_argument("--page-token", default="")
    stream = sub.add_parser("stream", help="SendStreamingMessage: one JSON line an event")
    stream.add_argument("text")
    stream.add_argument("--task", default="")
    subscribe = sub.add_parser("subscribe", help="SubscribeToTask: one JSON line an event")
    subscribe.add_argument("id")
    cancel = sub.add_parser("cancel")
    cancel.add_argument("id")
    args = parser.parse_args()
    try:
        answer = asyncio.run(run(args))
    except Exception as error:  # the SDK's errors, mapped from ErrorInfo
        print(json.dumps({"error": type(error).__name__, "message": str(error)}))
        sys.exit(2)
    if isinstance(answer, dict):
        print(json.dumps(answer))
    elif answer is not None:
        print(json.dumps(json_format.MessageToDict(answer)))


if __name__ == "__main__":
    main()
