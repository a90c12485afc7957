package tracing

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"sort"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentc-dev/agentc/builtins/internal/errtext"
	"github.com/agentc-dev/agentc/internal/credential"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "tracing"

// InstrumentationName is the tracer name the layer uses.
const InstrumentationName = "github.com/agentc-dev/agentc/builtins/tracing"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn},
		Doc:     "an OpenTelemetry span per call and stage, held across the whole stream",
		New:     func() runtime.Middleware { return &Tracing{} },
	})
}

// Tracing is the tracing middleware; its exported fields are its config
// (schemas/tracing.cue).
type Tracing struct {
	SpanName   string            `json:"span_name,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Log writes each span as a slog record (Deps.Logger) when no
	// OpenTelemetry provider is installed.
	Log bool `json:"log,omitempty"`
	// IncludeErrors records a failed call's error text in clear (the
	// run's secrets masked); without it the span's status and exception
	// hold what errtext.Withheld keeps, as log's lines and audit's records
	// do.
	IncludeErrors bool `json:"include_errors,omitempty"`

	tracer trace.Tracer
	start  []trace.SpanStartOption
	off    bool
	// maskText hides the run's secrets (the results of its secret_result
	// tools) in an error text recorded in clear.
	maskText func(runID, s string) string
	// digester digests a withheld error's text (settings.digest_key_env).
	digester runtime.Digester
}

// Provision creates the tracer and the span options. Without a provider (no
// Deps.TracerProvider, and no global provider installed with
// otel.SetTracerProvider before Build) or with the no-op provider, the layer
// passes calls through untouched, unless Log is set: its spans are then
// logged through the layer's slog logger.
func (t *Tracing) Provision(b *runtime.BuildContext) error {
	tp := b.TracerProvider()
	switch {
	case !isNoop(tp):
		t.tracer = tp.Tracer(InstrumentationName)
	case t.Log:
		t.tracer = &logTracer{logger: b.Logger, clock: b.Clock()}
	default:
		t.off = true
		return nil
	}
	t.maskText = b.SecretText()
	t.digester = b.Digester()
	if t.SpanName == "" {
		t.SpanName = "agentc." + b.Stage
	}
	attrs := []attribute.KeyValue{
		attribute.String("agentc.stage", b.Stage),
		attribute.String("agentc.layer", b.Name()),
	}
	keys := make([]string, 0, len(t.Attributes))
	for k := range t.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		attrs = append(attrs, attribute.String(k, t.Attributes[k]))
	}
	kind := trace.SpanKindInternal
	if b.Stage == plan.StageChat {
		kind = trace.SpanKindClient
	}
	t.start = []trace.SpanStartOption{trace.WithAttributes(attrs...), trace.WithSpanKind(kind)}
	return nil
}

// isNoop reports whether tp records nothing: the trace/noop provider, or
// the global default that only delegates once a provider is installed.
func isNoop(tp trace.TracerProvider) bool {
	if _, ok := tp.(noop.TracerProvider); ok {
		return true
	}
	t := reflect.TypeOf(tp)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// errorText is what a span records of a failure whose text is text: with
// include_errors the text, the run's secrets masked and any credential it
// quotes scrubbed (credential.Scrub: a span leaves the process, to a
// collector); without it the text is withheld (errtext.Withheld), since a
// tool's error may quote its arguments. what is the layer's own note
// ("panic").
func (t *Tracing) errorText(runID string, err error, text, what string) string {
	if t.IncludeErrors {
		return credential.Scrub(t.maskText(runID, text))
	}
	return errtext.Withheld(t.digester, err, text, what)
}

// recordError records msg, what the span keeps of a failure (errorText),
// as the span's exception event (of type typ) and its error status. The
// event is written as span.RecordError writes one, but for its message.
func recordError(span trace.Span, typ, msg string, extra ...attribute.KeyValue) {
	span.AddEvent("exception", trace.WithAttributes(append([]attribute.KeyValue{
		attribute.String("exception.type", typ), attribute.String("exception.message", msg)}, extra...)...))
	span.SetStatus(codes.Error, msg)
}

func (t *Tracing) end(span trace.Span, runID string, err error) {
	if err != nil {
		recordError(span, fmt.Sprintf("%T", err), t.errorText(runID, err, err.Error(), ""))
		span.SetAttributes(attribute.String("agentc.outcome", runtime.Status(err)),
			attribute.String("agentc.error_kind", runtime.KindOf(err)))
	}
	span.End()
}

// endPanicking ends span when next did not return: it records the panic
// value p with an error status and raises the panic again (p is nil when the
// goroutine is exiting through runtime.Goexit, which then goes on).
func (t *Tracing) endPanicking(span trace.Span, runID string, p any) {
	text := "panic"
	if p != nil {
		text = fmt.Sprintf("panic: %v", p)
	}
	recordError(span, "panic", t.errorText(runID, nil, text, "panic"), attribute.String("exception.stacktrace", string(debug.Stack())))
	span.SetAttributes(attribute.String("agentc.outcome", "failed"), attribute.String("agentc.error_kind", "panic"))
	span.End()
	if p != nil {
		panic(p)
	}
}

// WrapChat implements runtime.ChatWrapper.
func (t *Tracing) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	if t.off {
		return next
	}
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		ctx, span := t.startSpan(ctx)
		rec := span.IsRecording()
		if rec {
			span.SetAttributes(attribute.String("agentc.run_id", c.Meta.Run.ID),
				attribute.String("agentc.model", c.Request.Model))
		}
		returned := false
		defer func() {
			if !returned {
				t.endPanicking(span, c.Meta.Run.ID, recover())
			}
		}()
		err := next(ctx, c, yield)
		returned = true
		if rec {
			span.SetAttributes(
				attribute.String("agentc.served", c.Served),
				attribute.Int("agentc.deltas", c.Deltas),
				attribute.Int("agentc.attempts", c.Meta.Attempts),
				attribute.Int64("agentc.input_tokens", c.Usage.InputTokens),
				attribute.Int64("agentc.output_tokens", c.Usage.OutputTokens),
				attribute.Bool("agentc.cached", c.Meta.Cached),
				attribute.Bool("agentc.stopped", c.Stopped),
			)
		}
		t.end(span, c.Meta.Run.ID, err)
		return err
	}
}

// WrapTool implements runtime.ToolWrapper.
func (t *Tracing) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	if t.off {
		return next
	}
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		ctx, span := t.startSpan(ctx)
		rec := span.IsRecording()
		if rec {
			span.SetAttributes(attribute.String("agentc.run_id", c.Meta.Run.ID), attribute.String("agentc.tool", c.Name))
		}
		returned := false
		defer func() {
			if !returned {
				t.endPanicking(span, c.Meta.Run.ID, recover())
			}
		}()
		v, err := next(ctx, c)
		returned = true
		if rec {
			span.SetAttributes(attribute.Int("agentc.attempts", c.Meta.Attempts),
				attribute.Bool("agentc.cached", c.Meta.Cached), attribute.Bool("agentc.deduped", c.Meta.Deduped))
		}
		t.end(span, c.Meta.Run.ID, err)
		return v, err
	}
}

// WrapTurn implements runtime.TurnWrapper.
func (t *Tracing) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	if t.off {
		return next
	}
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		ctx, span := t.startSpan(ctx)
		rec := span.IsRecording()
		if rec {
			span.SetAttributes(attribute.String("agentc.run_id", c.Meta.Run.ID))
			if c.Session.ID != "" {
				span.SetAttributes(attribute.String("agentc.session", c.Session.ID))
			}
		}
		returned := false
		defer func() {
			if !returned {
				t.endPanicking(span, c.Meta.Run.ID, recover())
			}
		}()
		out, err := next(ctx, c)
		returned = true
		if rec {
			span.SetAttributes(attribute.Int("agentc.output_bytes", len(out)))
		}
		t.end(span, c.Meta.Run.ID, err)
		return out, err
	}
}

// Exports reports whether the layer records spans with tp, the provider
// it is built with (nil: the global one): whether tp is other than the
// trace/noop provider and the global default no provider was installed
// into. Without one, a layer passes calls through, or logs its spans
// with log: true.
func Exports(tp trace.TracerProvider) bool {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return !isNoop(tp)
}
