package serve

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// twoTenants declares a model the host serves and the keys of two
// tenants.
const twoTenants = `package gw
models: primary: {}
keys: {
	alice: {sha256: "%s", tenant: "bank-a"}
	bob: {sha256: "%s", tenant: "bank-b"}
}
`

// heldModel answers once release is closed, counting the calls that
// reached it on started.
func heldModel(started chan<- struct{}, release <-chan struct{}) runtime.ModelClient {
	return runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		yield(runtime.Delta{Text: "ok"})
		yield(runtime.Delta{FinishReason: runtime.FinishStop, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}})
		return nil
	})
}

// One tenant holding the gateway's calls in flight (slow streams, a
// stalled upstream) would leave none for the others, every call of theirs
// a 503: where the keys name more than one tenant, a tenant is served at
// most MaxInFlightPerTenant calls at once (half of MaxInFlight by
// default), and the others are served.
func TestOneTenantCannotHoldEveryCallInFlight(t *testing.T) {
	started, release := make(chan struct{}, 16), make(chan struct{})
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(twoTenants, sha("alice-key"), sha("bob-key")))),
		WatchInterval: -1, MaxInFlight: 4,
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": heldModel(started, release)}, nil
		}})
	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	call := func(c openai.Client) error {
		// Bounded: a call admitted past the share would wait for release.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "primary",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		return err
	}
	alice, bob := client("alice-key"), client("bob-key")

	var wg sync.WaitGroup
	held := make([]error, 2)
	for i := range held {
		wg.Go(func() { held[i] = call(alice) })
	}
	for range held {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("alice's calls did not reach the model")
		}
	}

	err := call(alice)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr, "alice's third call, past her share")
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "bank-a")
	assert.Equal(t, "1", apiErr.Response.Header.Get("Retry-After"))

	done := make(chan error, 1)
	go func() { done <- call(bob) }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("bob's call was refused while alice held her share: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("bob's call did not reach the model")
	}
	close(release)
	require.NoError(t, <-done)
	wg.Wait()
	for _, err := range held {
		require.NoError(t, err)
	}
	// The share is returned when a call ends.
	require.NoError(t, call(alice))
	require.NoError(t, call(alice))
	assert.Contains(t, scrape(t, s.url), `agentc_serve_requests_total{code="503",model="-",route="chat_completions"} 1`)
}

// Under a policy whose keys name one tenant, that tenant is every caller:
// it is bounded by MaxInFlight alone.
func TestOneTenantHasEveryCallInFlight(t *testing.T) {
	started, release := make(chan struct{}, 16), make(chan struct{})
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf("package gw\nmodels: primary: {}\nkeys: alice: {sha256: %q}\n", sha("alice-key")))),
		WatchInterval: -1, MaxInFlight: 4,
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": heldModel(started, release)}, nil
		}})
	c := openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey("alice-key"), option.WithMaxRetries(0))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		})
	}
	for range errs {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the calls did not all reach the model")
		}
	}
	close(release)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}
