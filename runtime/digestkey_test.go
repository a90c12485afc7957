package runtime_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const testDigestKey = "0123456789abcdef0123456789abcdef-test-key"

// TestADigestKeySetIsReadAndMissingFailsBuild: a policy that sets
// settings.digest_key_env builds only with the variable set to a key of
// 32 bytes or more; the error names the variable, never its value.
func TestADigestKeySetIsReadAndMissingFailsBuild(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	p.Settings.DigestKeyEnv = "AGENTC_TEST_DIGEST_KEY"

	t.Setenv("AGENTC_TEST_DIGEST_KEY", "")
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "settings.digest_key_env: environment variable AGENTC_TEST_DIGEST_KEY is not set")

	t.Setenv("AGENTC_TEST_DIGEST_KEY", "short-secret-1234")
	_, err = runtime.Build(context.Background(), p, runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "environment variable AGENTC_TEST_DIGEST_KEY: a digest key needs at least 32 bytes, this one has 17")
	assert.NotContains(t, err.Error(), "short-secret-1234")

	t.Setenv("AGENTC_TEST_DIGEST_KEY", testDigestKey)
	var got *runtime.ToolCall
	deps := runtime.Deps{Tools: map[string]runtime.ToolFunc{"check_pin": func(_ context.Context, c *runtime.ToolCall) (any, error) {
		got = &runtime.ToolCall{Name: c.Name, Args: c.Args, Meta: c.Meta}
		got.Meta.IdempotencyKey = c.IdempotencyKey()
		return c.ArgsDigest(), nil
	}}}
	p.Tools = map[string]plan.Tool{"check_pin": {}}
	keyed := rt.Build(t, p, deps)
	req := runtime.ToolRequest{Name: "check_pin", Args: map[string]any{"pin": "4821"}}
	res, err := keyed.Tool(context.Background(), req)
	require.NoError(t, err)
	mac := hmac.New(sha256.New, []byte(testDigestKey))
	mac.Write([]byte(`{"pin":"4821"}`))
	assert.Equal(t, runtime.KeyedDigestPrefix+hex.EncodeToString(mac.Sum(nil)), res.Value)
	keyedKey := got.Meta.IdempotencyKey

	p.Settings.DigestKeyEnv = ""
	plain := rt.Build(t, p, deps)
	res, err = plain.Tool(context.Background(), req)
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(`{"pin":"4821"}`))
	assert.Equal(t, hex.EncodeToString(sum[:]), res.Value)
	// The derived idempotency key, which an audit record holds with the
	// run id, is derived from the keyed digest: not from one anyone can
	// compute.
	assert.NotEqual(t, got.Meta.IdempotencyKey, keyedKey)
}

// TestADigesterNeverShowsItsKey: however a Digester is printed, logged or
// marshalled, its key is not in it; an auditor holding the key matches a
// record's digest with Args.
func TestADigesterNeverShowsItsKey(t *testing.T) {
	_, err := runtime.NewDigester([]byte("too short"))
	require.Error(t, err)
	d, err := runtime.NewDigester([]byte(testDigestKey))
	require.NoError(t, err)
	var log strings.Builder
	slog.New(slog.NewTextHandler(&log, nil)).Info("x", "digester", d)
	j, err := json.Marshal(struct{ D runtime.Digester }{d})
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprint(d), fmt.Sprintf("%+v %#v %s", d, d, d), log.String(), string(j)} {
		assert.NotContains(t, s, "0123456789abcdef", s)
		assert.Contains(t, s, "keyed")
	}
	// Held in a struct, where fmt does not call its String.
	holder := struct{ d runtime.Digester }{d}
	for _, s := range []string{fmt.Sprintf("%v", holder), fmt.Sprintf("%+v", holder), fmt.Sprintf("%#v", holder)} {
		assert.NotContains(t, s, "0123456789abcdef", s)
		assert.NotContains(t, s, "48 49 50", s, "nor its bytes")
	}
	assert.True(t, d.Keyed())
	assert.False(t, d.Plain().Keyed())

	keyed, err := d.Args(map[string]any{"pin": "4821", "n": 1.0})
	require.NoError(t, err)
	plain, err := d.Plain().Args(map[string]any{"n": json.Number("1.0"), "pin": "4821"})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(keyed, runtime.KeyedDigestPrefix))
	assert.Len(t, plain, 64)
	// The form a stored digest is in says which Digester reads it.
	assert.True(t, d.Of(keyed).Keyed())
	assert.False(t, d.Of(plain).Keyed())
	other, err := runtime.NewDigester([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	again, err := other.Args(map[string]any{"pin": "4821", "n": 1})
	require.NoError(t, err)
	assert.NotEqual(t, keyed, again, "another key, another digest")
}
