package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentc-dev/agentc/runtime"
)

// A policy whose chains trace, served without an OpenTelemetry provider,
// is served with one warning at start saying its spans go nowhere (or to
// the log only, for a layer with log: true); with a provider, none.
func TestTracingWithoutAnExporterIsWarnedOf(t *testing.T) {
	const policy = `package gw

models: primary: {provider: "openai", model: "m", api_key_env: "AGENTC_TEST_UNTRACED_KEY"}
chains: chat: [{use: "tracing"}, {use: "log"}]
chains: tool: [{use: "tracing", name: "tool_spans", log: true}]
`
	t.Setenv("AGENTC_TEST_UNTRACED_KEY", "k")
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1})
	logs := s.logs.String()
	assert.Equal(t, 1, strings.Count(logs, "OpenTelemetry"), logs)
	var line string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "OpenTelemetry") {
			line = l
		}
	}
	assert.Contains(t, line, "level=WARN")
	assert.Contains(t, line, "no OpenTelemetry exporter is configured")
	assert.Contains(t, line, "OTEL_EXPORTER_OTLP_ENDPOINT")
	assert.Contains(t, line, "dropped=[chat:tracing]")
	assert.Contains(t, line, "logged=[tool:tool_spans]")

	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	s = startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1,
		Deps: runtime.Deps{TracerProvider: tp}})
	assert.NotContains(t, s.logs.String(), "OpenTelemetry", "with a provider the spans are exported")
}
