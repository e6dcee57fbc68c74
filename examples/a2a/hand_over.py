import asyncio, sys, uuid, grpc.aio
from a2a.client import AuthInterceptor, ClientConfig, ClientFactory, CredentialService
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

class Token(CredentialService):  # the operator token, as the card's bearer scheme asks
    async def get_credentials(self, name, context): return sys.argv[2]

async def main(card_url):
    config = ClientConfig(supported_protocol_bindings=["GRPC"], streaming=False, grpc_channel_factory=grpc.aio.insecure_channel)
    client = await ClientFactory(config).create_from_url(card_url, interceptors=[AuthInterceptor(Token())])
    async def send(text, task_id=""):  # blocks until the task waits for us or is done
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], task_id=task_id)
        return [event async for event in client.send_message(SendMessageRequest(message=message))][-1].task
    task = await send("Write the guide\nA page on how to start.")
    while task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:  # its plan, then its result
        print(task.status.message.parts[0].text.splitlines()[0])
        task = await send("approve", task.id)
    print({a.name: a.parts[0].text for a in task.artifacts}["commit"])

asyncio.run(main(sys.argv[1]))
