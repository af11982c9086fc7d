"""A gRPC client no one here wrote: the gRPC project's own C core (Debian's python3-grpcio).

Usage: grpcio_client.py call <file descriptor set> <host:port> <call as JSON>

The call is {"method": "/package.Service/Method", "messages": [request, ...], "metadata": [[name,
value], ...], "timeout": seconds, "take": n}: every request is sent (one for a unary or
server-streaming method), and the call is cancelled once `take` responses have come. Messages,
both ways, are proto3 JSON.
The message classes are made at run time from the descriptor set (`buf build -o set.binpb`); there
are no generated stubs. Each response is written to stderr as it comes, one JSON line, and the
whole call to stdout as one JSON object: its status, its responses with when each came (ms after
the call began), its metadata and grpc-status-details-bin decoded as google.rpc.Status.
"""

import base64
import json
import sys
import time

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, json_format, message_factory


def message_class(descriptor):
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)


def load(set_path):
    files = descriptor_pb2.FileDescriptorSet()
    with open(set_path, "rb") as source:
        files.ParseFromString(source.read())
    pool = descriptor_pool.DescriptorPool()
    streaming = {}
    for file in files.file:
        pool.Add(file)
        for service in file.service:
            for method in service.method:
                path = f"/{file.package}.{service.name}/{method.name}"
                streaming[path] = (method.client_streaming, method.server_streaming)
    return pool, streaming


def to_json(message, pool):
    return json_format.MessageToDict(message, descriptor_pool=pool)


def metadata_of(pairs):
    """Metadata as a JSON object; the values of binary (-bin) keys in base64."""
    return {
        key: base64.b64encode(value).decode() if isinstance(value, bytes) else value for key, value in pairs or ()
    }


def status_details(pairs, pool):
    """grpc-status-details-bin as google.rpc.Status, its details unpacked; None without it."""
    for key, value in pairs or ():
        if key == "grpc-status-details-bin":
            status = message_class(pool.FindMessageTypeByName("google.rpc.Status"))()
            status.ParseFromString(value)
            return to_json(status, pool)
    return None


def call(set_path, target, spec):
    pool, streaming = load(set_path)
    method = spec["method"]
    service_name, method_name = method.lstrip("/").rsplit("/", 1)
    try:
        descriptor = pool.FindServiceByName(service_name).FindMethodByName(method_name)
        request_class = message_class(descriptor.input_type)
        response_class = message_class(descriptor.output_type)
        client_streaming, server_streaming = streaming[method]
    except KeyError:
        # A method the descriptor set lacks: sent as empty messages, its answer read as empty.
        request_class = response_class = empty_pb2.Empty
        client_streaming = server_streaming = False

    requests = [json_format.ParseDict(m, request_class(), descriptor_pool=pool) for m in spec.get("messages", [{}])]
    metadata = [tuple(pair) for pair in spec.get("metadata", [])]
    timeout = spec.get("timeout")
    take = spec.get("take")

    kind = {
        (False, False): "unary_unary",
        (False, True): "unary_stream",
        (True, False): "stream_unary",
        (True, True): "stream_stream",
    }[(client_streaming, server_streaming)]

    responses = []
    began = time.monotonic()

    def received(message):
        entry = {"at_ms": round((time.monotonic() - began) * 1000), "message": to_json(message, pool)}
        responses.append(entry)
        print(json.dumps(entry), file=sys.stderr, flush=True)

    with grpc.insecure_channel(target) as channel:
        stub = getattr(channel, kind)(
            method, request_serializer=request_class.SerializeToString, response_deserializer=response_class.FromString
        )
        argument = iter(requests) if client_streaming else requests[0]
        try:
            if server_streaming:
                answer = stub(argument, metadata=metadata, timeout=timeout)
                for message in answer:
                    received(message)
                    if take is not None and len(responses) >= take:
                        answer.cancel()
                        break
            else:
                message, answer = stub.with_call(argument, metadata=metadata, timeout=timeout)
                received(message)
        except grpc.RpcError as error:
            answer = error
        elapsed = round((time.monotonic() - began) * 1000)
        code = answer.code()
        trailing = answer.trailing_metadata()
        return {
            "code": code.name if code is not None else None,
            "message": answer.details() or "",
            "elapsed_ms": elapsed,
            "responses": responses,
            "initial_metadata": metadata_of(answer.initial_metadata()),
            "trailing_metadata": metadata_of(trailing),
            "status_details": status_details(trailing, pool),
        }


def main():
    command, set_path, target, spec = sys.argv[1:]
    if command != "call":
        sys.exit(f"unknown command {command}: the one command is call")
    print(json.dumps(call(set_path, target, json.loads(spec))))


if __name__ == "__main__":
    main()
