package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/agentc-dev/agentc/internal/credential"
)

// tracing is what tracerProvider tells serve to log: the endpoint and the
// exporters OTEL_TRACES_EXPORTER names besides otlp, which agentc does
// not run.
type tracing struct {
	endpoint string
	ignored  []string
}

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
// set, or it is "none", or OTEL_SDK_DISABLED is true. A configuration
// agentc cannot honour (no otlp among the exporters, the grpc or http/json
// protocol, an endpoint that is not an http or https URL, headers the
// exporter cannot read and would drop) is an error naming the variable,
// never quoting a header's value.
func tracerProvider(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, tracing, error) {
	var t tracing
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, t, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if e := getenv(name); e != "" {
			if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, t, fmt.Errorf("%s: not an http or https URL with a host (http://collector:4318): the exporter would send to localhost", name)
			}
		}
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	otlp, none := false, false
	for _, e := range strings.Split(exp, ",") {
		switch e = strings.ToLower(strings.TrimSpace(e)); e {
		case "":
		case "otlp":
			otlp = true
		case "none":
			none = true
		default:
			t.ignored = append(t.ignored, e)
		}
	}
	switch {
	case otlp:
		if endpoint == "" {
			endpoint = "http://localhost:4318 (the default)"
		}
	case exp == "" && endpoint == "", none && t.ignored == nil:
		return nil, t, nil
	case exp != "":
		return nil, t, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: agentc exports spans over OTLP only (otlp, or none)", exp)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "http/protobuf" {
				return nil, t, fmt.Errorf("%s=%q: agentc exports spans over OTLP/HTTP with protobuf only (http/protobuf, to a collector's port 4318)", name, p)
			}
			break
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := checkHeaders(getenv(name)); err != nil {
			return nil, t, fmt.Errorf("%s: %v", name, err)
		}
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, t, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "agentc"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, t, fmt.Errorf("the tracing resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	t.endpoint = withoutUserinfo(endpoint)
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), t, nil
}

// startTracing installs the OTLP exporter the OTEL_* variables that getenv
// reads configure (tracerProvider), for a command whose tracing layers'
// spans it exports: a failed export and a warning about the configuration
// go to logger, scrubbed (credential.LogHandler), which says where the
// spans go. It returns the provider
// (nil when none is configured) and flush, which the command calls before
// it exits: it sends the spans still batched, within 5 seconds, and stops
// the exporter (nothing without a provider). OpenTelemetry's own lines go
// to the logger otel.SetLogger was given (otelLogger).
func startTracing(ctx context.Context, getenv func(string) string, logger *slog.Logger) (*sdktrace.TracerProvider, func(), error) {
	tp, tr, err := tracerProvider(ctx, getenv)
	if err != nil || tp == nil {
		return nil, func() {}, err
	}
	// An export's error may quote the collector's answer, and that the
	// credential it was sent.
	logger = slog.New(credential.LogHandler(logger.Handler()))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: spans not exported", "error", err)
	}))
	if tr.ignored != nil {
		logger.Warn("tracing: OTEL_TRACES_EXPORTER names exporters agentc does not run; spans go over OTLP only", "ignored", strings.Join(tr.ignored, ","))
	}
	logger.Info("exporting the tracing layers' spans over OTLP/HTTP", "endpoint", tr.endpoint)
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			logger.Warn("tracing: the last spans were not exported", "error", err)
		}
	}, nil
}

// stderrTracing is startTracing for a command that writes its lines to
// env's standard error (agentc run, agentc test), OpenTelemetry's own
// among them, with the OTEL_* variables of the process.
func stderrTracing(ctx context.Context, env *cliEnv) (*sdktrace.TracerProvider, func(), error) {
	handler := slog.NewTextHandler(env.stderr, nil)
	otel.SetLogger(otelLogger(handler))
	return startTracing(ctx, os.Getenv, slog.New(handler))
}

// propagators reads OTEL_PROPAGATORS, which getenv reads, as the
// OpenTelemetry SDKs read it (a comma-separated list, any case; unset,
// tracecontext and baggage): off is true when it is set and names no
// tracecontext (none, b3), and ignored lists the propagators it names
// that agentc does not run (it reads and sends W3C Trace Context only).
func propagators(getenv func(string) string) (off bool, ignored []string) {
	v := strings.TrimSpace(getenv("OTEL_PROPAGATORS"))
	if v == "" {
		return false, nil
	}
	off = true
	for _, p := range strings.Split(v, ",") {
		switch p = strings.ToLower(strings.TrimSpace(p)); p {
		case "tracecontext":
			off = false
		case "", "none":
		default:
			ignored = append(ignored, p)
		}
	}
	return off, ignored
}

// checkHeaders returns an error if the exporter cannot read a header of
// v, a list of KEY=VALUE pairs with URL-encoded values: it would drop the
// header (and the credential it carries) and log its value. The error
// names the header by its place and key, never by its value.
func checkHeaders(v string) error {
	if v == "" {
		return nil
	}
	for i, pair := range strings.Split(v, ",") {
		k, val, found := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		switch {
		case !found:
			return fmt.Errorf("header %d is not KEY=VALUE", i+1)
		case !httpguts.ValidHeaderFieldName(k):
			return fmt.Errorf("header %d has no valid name before its '='", i+1)
		}
		if _, err := url.PathUnescape(val); err != nil {
			return fmt.Errorf("header %d (%s) has a value that is not URL-encoded (a %% not followed by two hex digits: write %%25 for %%)", i+1, k)
		}
	}
	return nil
}

// otelLogger returns the logger OpenTelemetry's own lines go to (an
// exporter's configuration it cannot read, a span dropped): h, with every
// credential scrubbed, at the SDK's verbosity mapped to slog's levels (its
// info and debug lines below slog's Info).
func otelLogger(h slog.Handler) logr.Logger {
	return logr.FromSlogHandler(credential.LogHandler(h))
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
