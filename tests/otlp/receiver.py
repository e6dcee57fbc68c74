"""An OTLP/gRPC receiver for the telemetry tests: it speaks the collector's
side of the OpenTelemetry protocol (TraceService and MetricsService, from
the `opentelemetry-proto` package) and writes what it receives, one JSON
object per line, to the file given, each line flushed before the export is
answered. It prints `listening on PORT` once it serves.

    python receiver.py OUT.jsonl

A span line: {"type": "span", "service", "trace_id", "span_id",
"parent_span_id", "name", "kind", "start_ns", "end_ns", "attributes",
"events", "status"}. A metric line: {"type": "metric", "service", "name",
"points": [{"attributes", "value"}]}, where a histogram point's value is
{"count", "sum"}.
"""

import json
import sys
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import (
    trace_service_pb2,
    trace_service_pb2_grpc,
)

LOCK = threading.Lock()


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    if kind is None:
        return None
    return getattr(any_value, kind)


def attributes_of(attributes):
    return {a.key: value_of(a.value) for a in attributes}


def service_of(resource):
    return attributes_of(resource.attributes).get("service.name", "")


class Out:
    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")

    def write(self, lines):
        with LOCK:
            for line in lines:
                self.file.write(json.dumps(line) + "\n")
            self.file.flush()


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, out):
        self.out = out

    def Export(self, request, context):
        lines = []
        for resource_spans in request.resource_spans:
            service = service_of(resource_spans.resource)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(
                        {
                            "type": "span",
                            "service": service,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "start_ns": span.start_time_unix_nano,
                            "end_ns": span.end_time_unix_nano,
                            "attributes": attributes_of(span.attributes),
                            "events": [e.name for e in span.events],
                            "status": span.status.code,
                        }
                    )
        self.out.write(lines)
        return trace_service_pb2.ExportTraceServiceResponse()


def points_of(metric):
    kind = metric.WhichOneof("data")
    data = getattr(metric, kind)
    points = []
    for point in data.data_points:
        if kind == "histogram":
            value = {"count": point.count, "sum": point.sum}
        else:
            value = getattr(point, point.WhichOneof("value"))
        points.append({"attributes": attributes_of(point.attributes), "value": value})
    return points


class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, out):
        self.out = out

    def Export(self, request, context):
        lines = []
        for resource_metrics in request.resource_metrics:
            service = service_of(resource_metrics.resource)
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    lines.append(
                        {
                            "type": "metric",
                            "service": service,
                            "name": metric.name,
                            "points": points_of(metric),
                        }
                    )
        self.out.write(lines)
        return metrics_service_pb2.ExportMetricsServiceResponse()


def main():
    out = Out(sys.argv[1])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(out), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(out), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening on {port}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
