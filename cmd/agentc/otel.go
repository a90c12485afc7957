package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracerProvider returns the OpenTelemetry provider the tracing layers'
// spans go to under agentc serve, configured from the standard OTEL_*
// environment variables that getenv reads: an OTLP/HTTP exporter (the
// protocol every OpenTelemetry collector and tracing backend takes, with
// its endpoint, headers, timeout, compression and certificates read by the
// exporter from OTEL_EXPORTER_OTLP_*), spans batched (OTEL_BSP_*) and
// sampled (OTEL_TRACES_SAMPLER) as the SDK reads them, under a resource
// naming the service "agentc" (OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override it). It returns nil when no exporter
// is configured: OTEL_TRACES_EXPORTER is unset and no OTLP endpoint is
// set, or it is "none", or OTEL_SDK_DISABLED is true. The string returned
// is the endpoint, to log. A configuration
// agentc cannot honour (another exporter, the grpc or http/json protocol)
// is an error naming the variable.
func tracerProvider(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, string, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, "", nil
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return nil, "", nil
	case "":
		if endpoint == "" {
			return nil, "", nil
		}
	case "otlp":
		if endpoint == "" {
			endpoint = "http://localhost:4318 (the default)"
		}
	default:
		return nil, "", fmt.Errorf("OTEL_TRACES_EXPORTER=%q: agentc exports spans over OTLP only (otlp, or none)", exp)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "http/protobuf" {
				return nil, "", fmt.Errorf("%s=%q: agentc exports spans over OTLP/HTTP with protobuf only (http/protobuf, to a collector's port 4318)", name, p)
			}
			break
		}
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "agentc"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, "", fmt.Errorf("the tracing resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), withoutUserinfo(endpoint), nil
}

// withoutUserinfo returns endpoint, a URL to log, without the user and
// password it may hold.
func withoutUserinfo(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return endpoint
}
