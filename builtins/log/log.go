package log

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentc-dev/agentc/builtins/internal/errtext"
	"github.com/agentc-dev/agentc/builtins/internal/outerpii"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "log"

func init() {
	runtime.Register(runtime.Module{
		ID:         ID,
		Builtin:    true,
		Stages:     []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn},
		Repeatable: true,
		Doc:        "one structured log line per call",
		New:        func() runtime.Middleware { return &Log{Level: "info"} },
	})
}

// Log is the log middleware; its exported fields are its config
// (schemas/log.cue).
type Log struct {
	Level       string `json:"level"`
	IncludeArgs bool   `json:"include_args"`
	// IncludeErrors logs a failed call's error text in clear; without it
	// the line holds what errtext.Withheld keeps, as audit's records do.
	IncludeErrors bool `json:"include_errors"`

	name   string
	level  slog.Level
	logger *slog.Logger
	// maskText and maskValue hide the run's secrets (the results of its
	// secret_result tools) in what a line carries.
	maskText  func(runID, s string) string
	maskValue func(runID string, v any) any
	// digester digests a withheld error's text (settings.digest_key_env).
	digester runtime.Digester
	// maskPII masks a failed tool call's error text as the pii layers
	// outside the layer mask it for the caller (nil without one).
	maskPII func(string) string
}

// Provision picks the logger.
func (l *Log) Provision(b *runtime.BuildContext) error {
	l.name = b.Name()
	l.logger = b.Logger
	l.maskText, l.maskValue = b.SecretText(), b.SecretValue()
	l.digester = b.Digester()
	mask, err := outerpii.Masker(b)
	l.maskPII = mask
	return err
}

// Validate parses the level.
func (l *Log) Validate() error {
	switch l.Level {
	case "debug":
		l.level = slog.LevelDebug
	case "info":
		l.level = slog.LevelInfo
	case "warn":
		l.level = slog.LevelWarn
	case "error":
		l.level = slog.LevelError
	default:
		return fmt.Errorf(`level must be one of "debug", "info", "warn", "error"; got %q`, l.Level)
	}
	return nil
}

func (l *Log) levelFor(err error) slog.Level {
	if err != nil && l.level < slog.LevelWarn {
		return slog.LevelWarn
	}
	return l.level
}

func (l *Log) common(m *runtime.Meta, took time.Duration, err error) []slog.Attr {
	attrs := []slog.Attr{
		slog.String("run_id", m.Run.ID),
		slog.String("outcome", runtime.Status(err)),
		slog.Duration("duration", took),
		slog.Int("attempts", m.Attempts),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", l.errorText(m, err, err.Error(), "")), slog.String("error_kind", runtime.KindOf(err)))
	}
	return attrs
}

// errorText is what a line says of a failure whose text is text: with
// include_errors the text, the run's secrets masked; without it the text
// is withheld (errtext.Withheld), since a tool's error may quote its
// arguments. what is the layer's own note ("panic"). In the tool chain,
// the personal data the pii layers outside the layer mask in the error for
// the caller is masked first (outerpii): the line holds, or digests, the
// text the caller reads.
func (l *Log) errorText(m *runtime.Meta, err error, text, what string) string {
	if l.maskPII != nil {
		text = l.maskPII(text)
	}
	if l.IncludeErrors {
		return l.maskText(m.Run.ID, text)
	}
	return errtext.Withheld(l.digester, err, text, what)
}

// panicked writes the line of a call whose inner layers panicked (outcome
// "failed", error_kind "panic", at least at warn), then raises the panic
// again with its value; p is nil when the goroutine is exiting instead
// (runtime.Goexit), which goes on as it was.
func (l *Log) panicked(ctx context.Context, msg string, m *runtime.Meta, start time.Time, p any, attrs ...slog.Attr) {
	if lv := max(l.level, slog.LevelWarn); l.logger.Enabled(ctx, lv) {
		text := "panic"
		if p != nil {
			text = fmt.Sprintf("panic: %v", p)
		}
		a := l.common(m, time.Since(start), nil)
		a[1] = slog.String("outcome", "failed")
		a = append(a, slog.String("error", l.errorText(m, nil, text, "panic")), slog.String("error_kind", "panic"))
		l.logger.LogAttrs(ctx, lv, msg, append(a, attrs...)...)
	}
	if p != nil {
		panic(p)
	}
}

// WrapChat implements runtime.ChatWrapper.
func (l *Log) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		start := time.Now()
		model := c.Request.Model
		done := false
		defer func() {
			if !done {
				l.panicked(ctx, "agentc chat", &c.Meta, start, recover(), slog.String("model", model))
			}
		}()
		err := next(ctx, c, yield)
		done = true
		attrs := []slog.Attr{slog.String("model", model), slog.String("served", c.Served),
			slog.Int("deltas", c.Deltas),
			slog.Int64("input_tokens", c.Usage.InputTokens), slog.Int64("output_tokens", c.Usage.OutputTokens)}
		if c.Meta.Cached {
			attrs = append(attrs, slog.Bool("cached", true))
		}
		meta, took := c.Meta, time.Since(start)
		write := func(err error) {
			lv := l.levelFor(err)
			if !l.logger.Enabled(ctx, lv) {
				return
			}
			a := append(l.common(&meta, took, err), attrs...)
			if l.IncludeArgs {
				a = append(a, slog.Any("messages", l.maskValue(meta.Run.ID, c.Request.Messages)))
			}
			l.logger.LogAttrs(context.WithoutCancel(ctx), lv, "agentc chat", a...)
		}
		if v := runtime.AnswerVerdictOf(ctx); v != nil && err == nil {
			// The host decides after the chain whether the answer goes
			// out (agentc serve refuses a proposed tool call the tool
			// chain refuses): the line says what it decided.
			v.Defer(write)
			return nil
		}
		write(err)
		return err
	}
}

// WrapTool implements runtime.ToolWrapper.
func (l *Log) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		start := time.Now()
		done := false
		defer func() {
			if !done {
				l.panicked(ctx, "agentc tool", &c.Meta, start, recover(), slog.String("tool", c.Name))
			}
		}()
		v, err := next(ctx, c)
		done = true
		lv := l.levelFor(err)
		if !l.logger.Enabled(ctx, lv) {
			return v, err
		}
		attrs := append(l.common(&c.Meta, time.Since(start), err), slog.String("tool", c.Name))
		if c.Meta.Cached {
			attrs = append(attrs, slog.Bool("cached", true))
		}
		if c.Meta.Deduped {
			attrs = append(attrs, slog.Bool("deduped", true))
		}
		if l.IncludeArgs {
			attrs = append(attrs, slog.Any("args", l.maskValue(c.Meta.Run.ID, c.Args)))
		}
		l.logger.LogAttrs(ctx, lv, "agentc tool", attrs...)
		return v, err
	}
}

// WrapTurn implements runtime.TurnWrapper.
func (l *Log) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		start := time.Now()
		done := false
		defer func() {
			if !done {
				l.panicked(ctx, "agentc turn", &c.Meta, start, recover())
			}
		}()
		out, err := next(ctx, c)
		done = true
		lv := l.levelFor(err)
		if !l.logger.Enabled(ctx, lv) {
			return out, err
		}
		attrs := append(l.common(&c.Meta, time.Since(start), err), slog.Int("output_bytes", len(out)))
		if c.Session.ID != "" {
			attrs = append(attrs, slog.String("session", c.Session.ID))
		}
		if l.IncludeArgs {
			attrs = append(attrs, slog.String("input", l.maskText(c.Meta.Run.ID, c.Input)))
		}
		l.logger.LogAttrs(ctx, lv, "agentc turn", attrs...)
		return out, err
	}
}
