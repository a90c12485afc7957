package serve_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/serve"
)

// Every class of failure gets its status: final ones a 4xx a client does not
// retry, the others a 5xx or 429 with the delay when one is known.
func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err   error
		code  int
		delay time.Duration
	}{
		{&runtime.BlockedError{Layer: "g", Message: "no"}, http.StatusForbidden, 0},
		{&runtime.BudgetError{Layer: "meter"}, http.StatusPaymentRequired, 0},
		// Refused for the calls in flight alone: they may end uncharged.
		{&runtime.BudgetError{Layer: "meter", Resource: "calls", Limit: 25, Pending: 25}, http.StatusTooManyRequests, time.Second},
		{fmt.Errorf("tool: %w", &runtime.InDoubtError{Layer: "idempotent", Tool: "pay", IdempotencyKey: "k"}), http.StatusConflict, 0},
		{&runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: 3 * time.Second}, http.StatusTooManyRequests, 3 * time.Second},
		{&runtime.CallError{Kind: runtime.KindTimeout}, http.StatusGatewayTimeout, 0},
		{context.DeadlineExceeded, http.StatusGatewayTimeout, 0},
		{&runtime.CallError{Kind: runtime.KindTransient, Status: 500}, http.StatusBadGateway, 0},
		// A layer's store that did not answer: the gateway's state, not the
		// model, is unavailable.
		{&runtime.CallError{Layer: "meter", Message: "budget store unavailable; the call did not run", Err: runtime.StoreUnavailable(fmt.Errorf("postgres budget reserve: timeout: %w", context.DeadlineExceeded))},
			http.StatusServiceUnavailable, serve.StoreRetryAfter},
		{fmt.Errorf("tool: %w", &runtime.CallError{Layer: "idempotent", Message: "idempotency store: cannot claim; the call did not run", Err: runtime.StoreUnavailable(errors.New("redis lease: dial tcp: connection refused"))}),
			http.StatusServiceUnavailable, serve.StoreRetryAfter},
		// As the layers raise it, its Kind set as KindOf names it.
		{runtime.StoreRefusal("rate_limit", "rate limit store unavailable; the call did not run", errors.New("redis: dial tcp: connection refused")),
			http.StatusServiceUnavailable, serve.StoreRetryAfter},
		// A layer's own timeout or failure keeps its status, whatever its
		// shape: a judge whose model failed is not a store outage.
		{&runtime.CallError{Layer: "judge", Message: "judge model failed", Err: errors.New("connection reset")}, http.StatusBadGateway, 0},
		{&runtime.CallError{Kind: runtime.KindTimeout, Layer: "retry", Err: context.DeadlineExceeded}, http.StatusGatewayTimeout, 0},
		{&runtime.CallError{Kind: runtime.KindTransient, Layer: "egress", Message: "resolve", Err: errors.New("no such host")}, http.StatusBadGateway, 0},
	} {
		code, delay := serve.StatusOf(tc.err)
		assert.Equal(t, tc.code, code, "%v", tc.err)
		assert.Equal(t, tc.delay, delay, "%v", tc.err)
	}
	code, delay := serve.StatusOf(&runtime.BreakerOpenError{Layer: "retry", Key: "primary", Until: time.Now().Add(10 * time.Second)})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.InDelta(t, 10*time.Second, delay, float64(time.Second))
}
