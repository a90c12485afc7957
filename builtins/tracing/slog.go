package tracing

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentc-dev/agentc/runtime"
)

// logTracer is the tracer of a layer with `log: true` when no OpenTelemetry
// provider is installed: each span is one slog record, written when the span
// ends.
type logTracer struct {
	embedded.Tracer
	logger *slog.Logger
	clock  runtime.Clock
}

// Start implements trace.Tracer.
func (t *logTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	s := &logSpan{t: t, name: name, start: t.clock.Now(), kind: cfg.SpanKind()}
	s.attrs = append(s.attrs, cfg.Attributes()...)
	return trace.ContextWithSpan(ctx, s), s
}

// logSpan collects a span's attributes, status and errors until End logs
// them.
type logSpan struct {
	embedded.Span
	t     *logTracer
	name  string
	kind  trace.SpanKind
	start time.Time

	mu     sync.Mutex
	attrs  []attribute.KeyValue
	status codes.Code
	desc   string
	errs   []string
	ended  bool
}

// End logs the span: "span" at info level, or at warn level with an error
// status, with its name, kind, duration, status and attributes.
func (s *logSpan) End(...trace.SpanEndOption) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	args := []any{"span", s.name, "kind", s.kind.String(), "duration", s.t.clock.Now().Sub(s.start)}
	level := slog.LevelInfo
	if s.status == codes.Error {
		level = slog.LevelWarn
		args = append(args, "status", "error", "status_message", s.desc)
	}
	for _, e := range s.errs {
		args = append(args, "exception", e)
	}
	// The last value set for a key is the one logged, as a span keeps it.
	seen := map[attribute.Key]int{}
	var kvs []attribute.KeyValue
	for _, kv := range s.attrs {
		if i, ok := seen[kv.Key]; ok {
			kvs[i] = kv
			continue
		}
		seen[kv.Key] = len(kvs)
		kvs = append(kvs, kv)
	}
	for _, kv := range kvs {
		args = append(args, string(kv.Key), kv.Value.AsInterface())
	}
	s.mu.Unlock()
	s.t.logger.Log(context.Background(), level, "span", args...)
}

// AddEvent implements trace.Span: an exception event's message is kept
// for the log record, as RecordError keeps an error's text; other events
// are not logged.
func (s *logSpan) AddEvent(name string, opts ...trace.EventOption) {
	if name != "exception" {
		return
	}
	cfg := trace.NewEventConfig(opts...)
	for _, kv := range cfg.Attributes() {
		if kv.Key == "exception.message" {
			s.mu.Lock()
			s.errs = append(s.errs, kv.Value.Emit())
			s.mu.Unlock()
		}
	}
}

// AddLink implements trace.Span; links are not logged.
func (s *logSpan) AddLink(trace.Link) {}

// IsRecording reports true until the span ends.
func (s *logSpan) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// RecordError keeps err's text for the log record.
func (s *logSpan) RecordError(err error, _ ...trace.EventOption) {
	if err == nil {
		return
	}
	s.mu.Lock()
	s.errs = append(s.errs, err.Error())
	s.mu.Unlock()
}

// SpanContext is the invalid span context: a logged span has no trace id.
func (s *logSpan) SpanContext() trace.SpanContext { return trace.SpanContext{} }

// SetStatus keeps the status for the log record.
func (s *logSpan) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	s.status, s.desc = code, description
	s.mu.Unlock()
}

// SetName renames the span.
func (s *logSpan) SetName(name string) {
	s.mu.Lock()
	s.name = name
	s.mu.Unlock()
}

// SetAttributes keeps the attributes for the log record.
func (s *logSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	s.attrs = append(s.attrs, kv...)
	s.mu.Unlock()
}

// TracerProvider returns a no-op provider: spans logged through slog come
// from the layer, not from an installed provider.
func (s *logSpan) TracerProvider() trace.TracerProvider { return noop.NewTracerProvider() }
