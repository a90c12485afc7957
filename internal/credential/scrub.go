package credential

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"sync"
)

// notAfter is what a credential stands after to be one: the start of the
// text or a character that is not a letter or a digit (an underscore, a
// dash, a slash, a space), so "my_sk-proj-..." holds one and
// "ask-questions-..." does not. It is the expressions' group 1, kept.
const notAfter = `(^|[^A-Za-z0-9])`

// inText matches a credential of the known shapes (shapes) where it
// stands in a text (an error naming a file, a header or a request), as
// group 2.
var inText = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(notAfter + `(` + anyShape() + `)`) })

// hinted matches what a client may not read either: a credential inText
// matches, and a provider's hint of an API key, its start and end around
// asterisks ("sk-proj-****4b1d"), which names the gateway's own key.
var hinted = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(notAfter + `(sk-[A-Za-z0-9_-]*\*{2,}[A-Za-z0-9_-]*|` + anyShape() + `)`)
})

// mayHold reports whether s may hold a credential inText matches: it
// spares the expression the texts that cannot.
func mayHold(s string) bool {
	if len(s) < 10 {
		return false
	}
	for _, sh := range Shapes {
		for _, n := range sh.Needles {
			if strings.Contains(s, n) {
				return true
			}
		}
	}
	return false
}

// Redact returns s with each credential it holds, and each provider's
// hint of a key, replaced by "[redacted]": what a client may read of a
// text (an upstream's error) that may quote one.
func Redact(s string) string {
	if !mayHold(s) {
		return s
	}
	return hinted().ReplaceAllString(s, "${1}[redacted]")
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
	var b strings.Builder
	last := 0
	for _, m := range inText().FindAllStringSubmatchIndex(s, -1) {
		sum := sha256.Sum256([]byte(s[m[4]:m[5]]))
		b.WriteString(s[last:m[4]])
		b.WriteString("[redacted sha256 " + hex.EncodeToString(sum[:])[:16] + "]")
		last = m[5]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
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
	msg := Scrub(r.Message)
	same := msg == r.Message
	if same {
		r.Attrs(func(a slog.Attr) bool {
			_, same = scrubAttr(a)
			return same
		})
	}
	if same { // nothing to scrub: the record as it came
		return s.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, msg, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		a, _ = scrubAttr(a)
		out.AddAttrs(a)
		return true
	})
	return s.h.Handle(ctx, out)
}

func (s *scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		scrubbed[i], _ = scrubAttr(a)
	}
	return &scrubHandler{h: s.h.WithAttrs(scrubbed)}
}

func (s *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{h: s.h.WithGroup(name)}
}

// scrubAttr returns a with its value scrubbed, and whether it is a as it
// came: nothing in it held a credential. A value a handler writes as text
// is scrubbed as that text: bytes as a string, an error's message, a
// json.Marshaler's JSON, a TextMarshaler's and a Stringer's text, any
// other value as %+v formats it.
func scrubAttr(a slog.Attr) (slog.Attr, bool) {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if t := Scrub(v.String()); t != v.String() {
			return slog.String(a.Key, t), false
		}
	case slog.KindGroup:
		g := v.Group()
		var scrubbed []slog.Attr
		for i, e := range g {
			t, same := scrubAttr(e)
			if !same && scrubbed == nil {
				scrubbed = append(make([]slog.Attr, 0, len(g)), g[:i]...)
			}
			if scrubbed != nil {
				scrubbed = append(scrubbed, t)
			}
		}
		if scrubbed != nil {
			return slog.Attr{Key: a.Key, Value: slog.GroupValue(scrubbed...)}, false
		}
	case slog.KindAny:
		if t, held := scrubAny(v.Any()); held {
			return slog.String(a.Key, t), false
		}
	}
	// A LogValuer is passed on resolved, so the text scrubbed is the text
	// written.
	return slog.Attr{Key: a.Key, Value: v}, a.Value.Kind() != slog.KindLogValuer
}

// scrubAny returns the text a handler writes of x scrubbed, and whether
// it held a credential: the text handler's text of it and the JSON
// handler's are both read.
func scrubAny(x any) (scrubbed string, held bool) {
	defer func() {
		if recover() != nil { // a method of a nil pointer
			scrubbed, held = scrubbedText(fmt.Sprintf("%+v", x))
		}
	}()
	switch x := x.(type) {
	case nil:
		return "", false
	case []byte:
		return scrubbedText(string(x))
	case error:
		return scrubbedText(x.Error())
	case json.Marshaler:
		if b, err := x.MarshalJSON(); err == nil {
			if t, held := scrubbedText(string(b)); held {
				return t, true
			}
		}
	case encoding.TextMarshaler:
		if b, err := x.MarshalText(); err == nil {
			return scrubbedText(string(b))
		}
	case fmt.Stringer:
		return scrubbedText(x.String())
	}
	if v := reflect.ValueOf(x); v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
		return scrubbedText(string(v.Bytes())) // a named []byte, written as text as well
	}
	if numeric(reflect.TypeOf(x)) {
		return "", false
	}
	return scrubbedText(fmt.Sprintf("%+v", x))
}

// numeric reports whether a value of t is written as numbers and booleans
// only (an []int, a [4]float64): its text, not formatted, holds no
// credential.
func numeric(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Slice, reflect.Array:
		return numeric(t.Elem())
	}
	return false
}

// scrubbedText returns s scrubbed and whether it held a credential.
func scrubbedText(s string) (string, bool) {
	t := Scrub(s)
	return t, t != s
}

// MinKeyTail is the length of the shortest tail of a key KeyForms
// returns: a fragment that long of a key (12 letters and digits of a
// random suffix at least) is the key's alone, where a shorter one (a
// prefix's word, "proj", "api03") may be any text's.
const MinKeyTail = 12

// KeyForms returns the texts a message may quote a key by, longest first:
// the key, and each tail of it after a separator (- or _) of MinKeyTail
// bytes at least, which a server may echo without the key's prefix
// ("upstream-7f3a9c2e4b1d" of "sk-upstream-7f3a9c2e4b1d"). A key shorter
// than MinKeyTail has no tail.
func KeyForms(key string) []string {
	if key == "" {
		return nil
	}
	forms := []string{key}
	for i := 0; i < len(key)-1; i++ {
		if (key[i] == '-' || key[i] == '_') && len(key)-i-1 >= MinKeyTail {
			forms = append(forms, key[i+1:])
		}
	}
	return forms
}
