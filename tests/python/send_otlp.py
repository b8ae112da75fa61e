"""A controller written against the official OpenTelemetry Python SDK, exporting over OTLP.

It mimics HyperShift's legacy HostedCluster loop (the operations of the plan's legacy order,
each an early return): one `reconcile` span per HostedCluster with the object's identity, one
child span per operation, and the loop stopping at the first error. Objects listed in
--fail-ssh fail at SSHKeySync (secret not found, as a kube client reports it), so the later
operations never run in the control.

Usage: send_otlp.py --plan PLAN.yaml --protocol grpc|http --endpoint ENDPOINT
                    --objects N --fail-ssh K [--unknown-operation]
Prints one line: "sent N reconciles (K failing at SSHKeySync) over PROTOCOL".
"""

import argparse
import sys
import uuid

import yaml
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode


def exporter(protocol, endpoint):
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", required=True)
    parser.add_argument("--protocol", choices=["grpc", "http"], required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--objects", type=int, default=10)
    parser.add_argument("--fail-ssh", type=int, default=3)
    parser.add_argument("--unknown-operation", action="store_true")
    args = parser.parse_args()

    with open(args.plan) as f:
        plan = yaml.safe_load(f)
    order = plan["spec"]["legacy"]["order"]
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "hypershift-operator", "shadow_reconciler.plan": plan["metadata"]["name"]}
        )
    )
    processor = BatchSpanProcessor(exporter(args.protocol, args.endpoint))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("hostedcluster-controller")

    for i in range(args.objects):
        failing = i < args.fail_ssh
        attributes = {
            "k8s.object.kind": "HostedCluster",
            "k8s.namespace.name": "clusters",
            "k8s.object.name": f"hc-{i}",
            "k8s.object.uid": str(uuid.UUID(int=i + 1)),
        }
        with tracer.start_as_current_span("reconcile", attributes=attributes) as root:
            for operation in order:
                with tracer.start_as_current_span(
                    operation, attributes={"shadow_reconciler.operation": operation}
                ) as span:
                    if failing and operation == "SSHKeySync":
                        span.set_attribute("error.type", "NotFound")
                        span.set_attribute("k8s.status.code", 404)
                        span.set_status(
                            Status(StatusCode.ERROR, 'failed to sync SSH key: secrets "ssh-key" not found')
                        )
                        break
            if failing:
                root.set_status(Status(StatusCode.ERROR, "reconciliation failed"))
            if args.unknown_operation and i == 0:
                with tracer.start_as_current_span(
                    "NotInThePlan", attributes={"shadow_reconciler.operation": "NotInThePlan"}
                ):
                    pass
    if not processor.force_flush(30_000):
        print("the exporter did not flush within 30 s", file=sys.stderr)
        return 1
    provider.shutdown()
    print(f"sent {args.objects} reconciles ({min(args.fail_ssh, args.objects)} failing at SSHKeySync) over {args.protocol}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
