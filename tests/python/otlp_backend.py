"""A tracing backend's OTLP/gRPC endpoint over TLS, standing in for Tempo or Jaeger in the tests.

Usage: otlp_backend.py --cert CERT.pem --key KEY.pem --port-file FILE --out SPANS.jsonl

Serves the OTLP TraceService on a free loopback port (written to --port-file once it listens),
with the official gRPC library and the OTLP protobuf types of the OpenTelemetry Python packages,
and appends one JSON line per span received to --out: {"service", "name", "trace_id",
"resource": {key: value}, "attributes": {key: value}}. Runs until killed.
"""

import argparse
import json
import os
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Backend(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, out):
        self.out = out
        self.lock = threading.Lock()

    def Export(self, request, context):
        lines = []
        for resource_spans in request.resource_spans:
            resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(json.dumps({
                        "service": resource.get("service.name"),
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "resource": resource,
                        "attributes": {a.key: value(a.value) for a in span.attributes},
                    }))
        with self.lock, open(self.out, "a") as f:
            for line in lines:
                f.write(line + "\n")
        return trace_service_pb2.ExportTraceServiceResponse()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.key, "rb") as f:
        key = f.read()
    with open(args.cert, "rb") as f:
        cert = f.read()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Backend(args.out), server)
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
    server.start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, args.port_file)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
