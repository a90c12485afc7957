package credential

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedactAndScrub(t *testing.T) {
	const key = "sk-proj-UPSTREAMSECRETKEY1234567890abcd"
	sum := sha256.Sum256([]byte(key))
	mark := "[redacted sha256 " + hex.EncodeToString(sum[:])[:16] + "]"
	for _, c := range []struct{ in, redacted, scrubbed string }{
		{"open /data/" + key + ": no such file", "open /data/[redacted]: no such file", "open /data/" + mark + ": no such file"},
		{"hint sk-proj-****4b1d here", "hint [redacted] here", "hint sk-proj-****4b1d here"},
		{"token ghp_0123456789abcdefABCDEF0123456789 and AKIAABCDEFGHIJKLMNOP", "token [redacted] and [redacted]", ""},
		{"task-force and sk-short stay", "task-force and sk-short stay", "task-force and sk-short stay"},
		{"", "", ""},
	} {
		assert.Equal(t, c.redacted, Redact(c.in), c.in)
		got := Scrub(c.in)
		if c.scrubbed == "" && c.in != "" {
			assert.NotContains(t, got, "ghp_")
			assert.NotContains(t, got, "AKIA")
			assert.Equal(t, 2, strings.Count(got, "[redacted sha256 "), got)
			continue
		}
		assert.Equal(t, c.scrubbed, got, c.in)
	}
}

// Every value of a log line the handler passes on is scrubbed: the message,
// strings, errors, groups, attributes given to With and values of other
// kinds whose text holds a credential.
func TestLogHandlerScrubsEveryValue(t *testing.T) {
	const key = "sk-ant-api03-SECRETSECRETSECRET00"
	var buf bytes.Buffer
	h := LogHandler(slog.NewJSONHandler(&buf, nil))
	assert.Same(t, h, LogHandler(h).(*scrubHandler), "a scrubbing handler is not wrapped again")
	logger := slog.New(h).With("upstream", "key "+key).WithGroup("g")
	logger.Warn("failed with "+key, "error", errors.New("denied: "+key), "paths", []string{"/a/" + key},
		slog.Group("inner", "text", key), "n", 3, "plain", "nothing here")
	out := buf.String()
	assert.NotContains(t, out, key)
	assert.Equal(t, 5, bytes.Count(buf.Bytes(), []byte("[redacted sha256 ")), out)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	g := line["g"].(map[string]any)
	assert.EqualValues(t, 3, g["n"], "a value without a credential keeps its kind")
	assert.Equal(t, "nothing here", g["plain"])
}

// The shapes docs/serve.md names are scrubbed where they stand after a
// character that is not a letter or a digit, an underscore included.
func TestScrubShapes(t *testing.T) {
	for _, c := range []struct{ in, secret string }{
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "eyJhbGciOiJIUzI1NiJ9"},
		{"key=AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890"},
		{"token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abcdefghijklmnop"},
		{"env my_sk-proj-UPSTREAMSECRETKEY1234567890", "sk-proj-UPSTREAM"},
		{"path /x/ghp_0123456789abcdefABCDEF0123456789", "ghp_0123456789"},
	} {
		got := Scrub(c.in)
		assert.NotContains(t, got, c.secret, c.in)
		assert.Contains(t, got, "[redacted sha256 ", c.in)
		assert.NotContains(t, Redact(c.in), c.secret, c.in)
	}
	assert.Equal(t, "env my_[redacted]", Redact("env my_sk-proj-UPSTREAMSECRETKEY1234567890"), "the character before is kept")
	for _, s := range []string{"ask-questions-about-everything-here", "Bearer short", "xhf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "task-force and sk-short"} {
		assert.Equal(t, s, Scrub(s))
		assert.Equal(t, s, Redact(s))
	}
}

// Ordinary text that only looks like the start of a credential is left
// alone: a snake_case name after hf_ (a Hugging Face token is letters and
// digits), a challenge's parameters after Bearer (a bearer token is a
// token68: letters, digits and -._~+/ then any =), and a word that ends a
// line before a long one on the next.
func TestScrubLeavesProse(t *testing.T) {
	for _, s := range []string{
		"call hf_hub_download_with_retries_and_backoff_enabled failed",
		`401: WWW-Authenticate: Bearer realm="https://auth.example.com/oauth", error="invalid_token"`,
		"missing bearer\nAuthorizationHeaderRequiredForThisRoute",
	} {
		s = strings.ReplaceAll(s, `\n`, "\n")
		assert.Equal(t, s, Scrub(s))
		assert.Equal(t, s, Redact(s))
		assert.False(t, Value().MatchString(s), s)
	}
	assert.False(t, Value().MatchString("hf_home_directory_for_the_models_cache"))
	// A token68 is still a bearer token, the text after it kept.
	got := Scrub("Authorization: Bearer abcDEF0123456789+/ab==, next")
	assert.NotContains(t, got, "abcDEF0123456789")
	assert.True(t, strings.HasSuffix(got, "], next"), got)
	assert.NotContains(t, Scrub("Authorization: bearer\t0123456789.abcdefghij_~-"), "0123456789.abcdefghij")
}

type marshals struct{ key string }

func (m marshals) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]string{"k": m.key}) }

type stringer struct{ key string }

type rawBytes []byte

func (s stringer) String() string { return "conn " + s.key }

// A value of any kind the handlers write as text is scrubbed: bytes, a
// json.Marshaler, a fmt.Stringer.
func TestLogHandlerScrubsBytesAndMarshalers(t *testing.T) {
	const key = "sk-ant-api03-SECRETSECRETSECRET00"
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		slog.New(LogHandler(h(&buf))).Info("m", "body", []byte("auth "+key), "m", marshals{key}, "s", stringer{key},
			"raw", rawBytes("k="+key), "n", []int{1, 2})
		out := buf.String()
		assert.NotContains(t, out, key, name)
		assert.NotContains(t, out, "U0VDUkVU", name) // base64 of part of it
		assert.Equal(t, 4, strings.Count(out, "[redacted sha256 "), "%s: %s", name, out)
	}
}

// BenchmarkLogHandler measures a typical access-log line, with no
// credential in it, through the scrubbing handler and, to compare, the
// handler it wraps.
func BenchmarkLogHandler(b *testing.B) {
	err := errors.New("upstream 503: overloaded")
	for _, c := range []struct {
		name string
		h    slog.Handler
	}{{"scrubbed", LogHandler(slog.NewTextHandler(io.Discard, nil))}, {"plain", slog.NewTextHandler(io.Discard, nil)}} {
		b.Run(c.name, func(b *testing.B) {
			logger := slog.New(c.h)
			b.ReportAllocs()
			for b.Loop() {
				logger.Info("request", "method", "POST", "path", "/v1/chat/completions", "status", 200,
					"duration", 1500*time.Millisecond, "model", "primary", "run", "r-1234", "error", err,
					"tokens", []int{12, 34}, "ok", true)
			}
		})
	}
}

type valuer struct{ key string }

func (v valuer) LogValue() slog.Value { return slog.StringValue("token " + v.key) }

// A LogValuer is scrubbed as it resolves, and a nil pointer whose methods
// panic is written as the handler writes it.
func TestLogHandlerScrubsLogValuers(t *testing.T) {
	const key = "ghp_0123456789abcdefABCDEF0123456789"
	var buf bytes.Buffer
	var nilMarshaler *marshalsPtr
	slog.New(LogHandler(slog.NewTextHandler(&buf, nil))).Info("m", "v", valuer{key}, "nil", nilMarshaler)
	assert.NotContains(t, buf.String(), key)
	assert.Contains(t, buf.String(), "[redacted sha256 ")
	assert.Contains(t, buf.String(), "nil=")
}

type marshalsPtr struct{ key string }

func (m *marshalsPtr) MarshalJSON() ([]byte, error) { return []byte(`"` + m.key + `"`), nil }
