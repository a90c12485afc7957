package retry_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestShouldRetryHeaderDecidesTheSameModelOnly: an upstream's
// x-should-retry says whether the same model is tried again; the status
// says what the failure is, so a fallback still moves on after a 429 or a
// 500 the provider asked not to retry, and a 400 it asked to retry is
// retried on the same model and stays a permanent 400.
func TestShouldRetryHeaderDecidesTheSameModelOnly(t *testing.T) {
	upstream := func(status int, shouldRetry string) error {
		h := http.Header{}
		if shouldRetry != "" {
			h.Set("X-Should-Retry", shouldRetry)
		}
		return wire.Call{Provider: "anthropic", Model: "claude"}.HTTP(nil, status, h, wire.Body{Type: "some_error", Message: "x"})
	}
	tests := []struct {
		name                      string
		err                       error
		primaryCalls, backupCalls int
		wantKind                  runtime.ErrorKind // of the call's error, when backup is not reached
	}{
		{"429 without the header", upstream(429, ""), 3, 1, ""},
		{"429 x-should-retry false", upstream(429, "false"), 1, 1, ""},
		{"500 x-should-retry false", upstream(500, "false"), 1, 1, ""},
		{"503 x-should-retry true", upstream(503, "true"), 3, 1, ""},
		{"400 x-should-retry true", upstream(400, "true"), 3, 0, runtime.KindPermanent},
		{"400 without the header", upstream(400, ""), 1, 0, runtime.KindPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			primary := rt.NewModel(rt.Response{Err: tt.err})
			backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
			pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
				rt.Layer("fallback", `{"models":["primary","backup"]}`),
				rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`),
			}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
			require.NoError(t, err)
			defer pl.Close()
			_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0)
			assert.Equal(t, tt.primaryCalls, primary.Calls(), "attempts on the same model")
			assert.Equal(t, tt.backupCalls, backup.Calls(), "fallback")
			if tt.backupCalls > 0 {
				require.NoError(t, err)
				assert.Equal(t, "backup", resp.Model)
				return
			}
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.wantKind, ce.Kind)
			assert.Equal(t, http.StatusBadRequest, ce.Status)
		})
	}
}
