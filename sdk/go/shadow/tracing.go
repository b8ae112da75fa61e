package shadow

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Tracing sets the global tracer provider up for the sidecar: spans of service (the resource's
// service.name, with attrs, e.g. shadow_reconciler.plan when the sidecar loads several plans)
// exported by the standard OTLP variables, OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT)
// and OTEL_EXPORTER_OTLP_PROTOCOL (grpc, the default, or http/protobuf), every span sampled
// (every reconcile is data) and a queue deep enough for a burst. Without an endpoint spans are
// recorded but not exported. Shut the provider down on exit to flush what is queued.
func Tracing(ctx context.Context, service string, attrs ...attribute.KeyValue) (*sdktrace.TracerProvider, error) {
	res := resource.NewSchemaless(append([]attribute.KeyValue{attribute.String("service.name", service)}, attrs...)...)
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") + os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" {
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		return tp, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exporter *otlptrace.Exporter
	var err error
	switch protocol {
	case "", "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: expected grpc or http/protobuf", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("the OTLP exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(exporter, sdktrace.WithMaxQueueSize(1<<16), sdktrace.WithMaxExportBatchSize(2048)),
	)
	otel.SetTracerProvider(tp)
	return tp, nil
}
