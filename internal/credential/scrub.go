package credential

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// inText matches a credential of Value's shapes where it stands in a text
// (an error naming a file, a header or a request).
var inText = regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}|sk-[A-Za-z0-9_-]{16,}|sk_(?:live|test)_\w{16,}|xox[abpr]-[\w-]{10,}|AKIA[0-9A-Z]{16})`)

// hinted matches what a client may not read either: a credential inText
// matches, and a provider's hint of an API key, its start and end around
// asterisks ("sk-proj-****4b1d"), which names the gateway's own key.
var hinted = regexp.MustCompile(`\bsk-[A-Za-z0-9_-]*\*{2,}[A-Za-z0-9_-]*|` + inText.String())

// mayHold reports whether s may hold a credential inText matches: it
// spares the expression the texts that cannot.
func mayHold(s string) bool {
	return len(s) >= 10 && (strings.Contains(s, "sk-") || strings.Contains(s, "sk_") || strings.Contains(s, "gh") ||
		strings.Contains(s, "glpat-") || strings.Contains(s, "xox") || strings.Contains(s, "AKIA"))
}

// Redact returns s with each credential it holds, and each provider's
// hint of a key, replaced by "[redacted]": what a client may read of a
// text (an upstream's error) that may quote one.
func Redact(s string) string {
	if !mayHold(s) {
		return s
	}
	return hinted.ReplaceAllLiteralString(s, "[redacted]")
}

// Scrub returns s with each credential it holds replaced by "[redacted
// sha256 HEX]", HEX the first 16 hex digits of the SHA-256 of the
// credential: what a log line or a span keeps of it. Whoever holds the
// credential can tell it is the one, and nobody can recover it. A
// provider's hint of a key ("sk-proj-****4b1d") is kept: it tells the
// operator which key a provider refused, and holds too little of it.
func Scrub(s string) string {
	if !mayHold(s) {
		return s
	}
	return inText.ReplaceAllStringFunc(s, func(c string) string {
		sum := sha256.Sum256([]byte(c))
		return "[redacted sha256 " + hex.EncodeToString(sum[:])[:16] + "]"
	})
}

// LogHandler returns a handler that writes to h what it is given with
// every credential scrubbed (Scrub): in the message, in each value (a
// string, an error, a group, any other value whose text holds one, written
// then as its scrubbed text) and in the attributes given to WithAttrs. A
// handler LogHandler returned is returned as it is.
func LogHandler(h slog.Handler) slog.Handler {
	if s, ok := h.(*scrubHandler); ok {
		return s
	}
	return &scrubHandler{h: h}
}

type scrubHandler struct{ h slog.Handler }

func (s *scrubHandler) Enabled(ctx context.Context, l slog.Level) bool { return s.h.Enabled(ctx, l) }

func (s *scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(scrubAttr(a))
		return true
	})
	return s.h.Handle(ctx, out)
}

func (s *scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		scrubbed[i] = scrubAttr(a)
	}
	return &scrubHandler{h: s.h.WithAttrs(scrubbed)}
}

func (s *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{h: s.h.WithGroup(name)}
}

// scrubAttr returns a with its value scrubbed.
func scrubAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if t := Scrub(v.String()); t != v.String() {
			return slog.String(a.Key, t)
		}
	case slog.KindGroup:
		g := v.Group()
		scrubbed := make([]slog.Attr, len(g))
		for i, e := range g {
			scrubbed[i] = scrubAttr(e)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(scrubbed...)}
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			text = x.Error()
		case fmt.Stringer:
			text = x.String()
		default:
			text = fmt.Sprintf("%+v", x)
		}
		if t := Scrub(text); t != text {
			return slog.String(a.Key, t)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
