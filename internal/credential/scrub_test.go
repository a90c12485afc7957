package credential

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

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
