package runtime_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// chatKeys records the idempotency keys a chat call, a clone of it made
// before its key was derived and a call of the layer's own with the same
// messages have.
type chatKeys struct {
	mu   sync.Mutex
	keys []string
}

func (k *chatKeys) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		clone := c.Clone()
		own := runtime.OwnCall(c, runtime.ChatRequest{Model: c.Request.Model, Messages: c.Request.Messages})
		k.mu.Lock()
		k.keys = []string{c.IdempotencyKey(), clone.IdempotencyKey(), own.IdempotencyKey()}
		k.mu.Unlock()
		return next(ctx, c, yield)
	}
}

var chatKeysSeen = &chatKeys{}

func init() {
	runtime.Register(runtime.Module{
		ID: "test.chatkeys", Stages: []plan.Stage{plan.StageChat}, New: func() runtime.Middleware { return chatKeysSeen },
	})
}

// TestADigestKeyKeysTheChatIdempotencyKey: the idempotency key derived for
// a chat call from its run and transcript was a truncated plain SHA-256,
// which anyone who holds it and the run id (an audit record, a provider's
// log) tests guessed prompts against. With settings.digest_key_env it is
// the HMAC under the key, for the call, its clones and the layers' own
// calls alike; without it, the plain form as before.
func TestADigestKeyKeysTheChatIdempotencyKey(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("test.chatkeys", "")}})
	msgs := []runtime.Message{{Role: "user", Content: "my PIN is 4821"}}
	b, err := json.Marshal(msgs)
	require.NoError(t, err)
	keyOf := func(h func() []byte) string { return "chat-" + hex.EncodeToString(h()[:16]) }
	input := append([]byte("chat\x00run-1\x00"), b...)
	plainSum := sha256.Sum256(input)
	plainKey := keyOf(func() []byte { return plainSum[:] })
	mac := hmac.New(sha256.New, []byte(testDigestKey))
	mac.Write(input)
	keyedKey := keyOf(func() []byte { return mac.Sum(nil) })

	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})
	for _, tt := range []struct {
		env, want string
	}{{"", plainKey}, {"AGENTC_TEST_CHAT_DIGEST_KEY", keyedKey}} {
		t.Setenv("AGENTC_TEST_CHAT_DIGEST_KEY", testDigestKey)
		p.Settings.DigestKeyEnv = tt.env
		pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: msgs}, 0)
		require.NoError(t, err)
		chatKeysSeen.mu.Lock()
		assert.Equal(t, []string{tt.want, tt.want, tt.want}, chatKeysSeen.keys, "digest_key_env %q", tt.env)
		chatKeysSeen.mu.Unlock()
	}
	assert.NotEqual(t, plainKey, keyedKey)
}
