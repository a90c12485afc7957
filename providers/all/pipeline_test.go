package all_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc"
	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

// load compiles a policy whose primary model is served by the OpenAI-shaped
// server oa and whose backup model by the Anthropic-shaped server an.
func load(t *testing.T, oa, an *ssetest.Server, chat string) *runtime.Pipeline {
	t.Helper()
	return loadWith(t, oa, an, "chains: chat: "+chat, runtime.Deps{})
}

// loadWith is load with the policy's other fields (chains...) and deps.
func loadWith(t testing.TB, oa, an *ssetest.Server, rest string, deps runtime.Deps) *runtime.Pipeline {
	t.Helper()
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-oa-test-key-1234")
	t.Setenv("AGENTC_TEST_ANTHROPIC_KEY", "sk-an-test-key-5678")
	dir := t.TempDir()
	src := fmt.Sprintf(`package p

models: {
	primary: {provider: "openai", model: "gpt-4.1-mini", api_key_env: "AGENTC_TEST_OPENAI_KEY", base_url: %q,
		usd_per_mtok_in: 0.4, usd_per_mtok_out: 1.6}
	backup: {provider: "anthropic", model: "claude-sonnet-4-5", api_key_env: "AGENTC_TEST_ANTHROPIC_KEY", base_url: %q,
		usd_per_mtok_in: 3, usd_per_mtok_out: 15}
}
%s
`, oa.URL+"/v1", an.URL, rest)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644))
	pl, err := agentc.Load(context.Background(), dir, deps)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

func transcript(t testing.TB, provider, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", provider, "testdata", name))
	require.NoError(t, err)
	return string(b)
}

func ledger(t *testing.T, pl *runtime.Pipeline, run string) runtime.Ledger {
	t.Helper()
	for _, l := range pl.Layers("chat") {
		if r, ok := l.Middleware.(runtime.LedgerReader); ok {
			return r.Ledger(run)
		}
	}
	t.Fatal("no meter in the chat chain")
	return runtime.Ledger{}
}

const resilient = `[
	{use: "meter"},
	{use: "fallback", models: ["primary", "backup"]},
	{use: "retry", max_attempts: 2, initial_delay: "1ms", max_delay: "2s"},
]`

func TestFallbackFromOpenAIToAnthropic(t *testing.T) {
	oa := ssetest.New(t,
		ssetest.Reply{Status: 503, Body: `{"error":{"message":"overloaded","type":"server_error"}}`},
		ssetest.Reply{Status: 500, Body: `{"error":{"message":"boom","type":"server_error"}}`})
	an := ssetest.New(t, ssetest.Reply{Body: transcript(t, "anthropic", "text.sse")})
	pl := load(t, oa, an, resilient)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	resp, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", resp.Text)
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, "stop", resp.FinishReason)
	assert.Equal(t, 2, oa.Requests(), "the retry inside the fallback tried the primary twice")
	assert.Equal(t, 1, an.Requests())
	assert.Equal(t, runtime.Usage{InputTokens: 472, OutputTokens: 15}, resp.Usage)
	l := ledger(t, pl, "r1")
	assert.Equal(t, int64(472), l.InputTokens, "the meter charges the usage the server reported")
	assert.Equal(t, int64(15), l.OutputTokens)
	assert.InDelta(t, 472*3.0/1e6+15*15.0/1e6, l.USD, 1e-12, "at the backup's prices")
	assert.Equal(t, int64(1), l.Calls)
}

func TestRetryWaitsTheServersDelayOn429(t *testing.T) {
	oa := ssetest.New(t,
		ssetest.Reply{Status: 429, Header: map[string]string{"Retry-After-Ms": "300"}, Body: transcript(t, "openai", "429.json")},
		ssetest.Reply{Body: transcript(t, "openai", "tool_call.sse")})
	an := ssetest.New(t)
	pl := load(t, oa, an, resilient)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r2"})
	resp, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "weather?"}}})
	require.NoError(t, err)
	assert.Equal(t, "primary", resp.Model)
	assert.Equal(t, 2, resp.Attempts)
	times := oa.Times()
	require.Len(t, times, 2)
	wait := times[1].Sub(times[0])
	assert.GreaterOrEqual(t, wait, 300*time.Millisecond, "the retry honours retry-after-ms")
	assert.Less(t, wait, 2*time.Second, "and waits no longer than asked (initial_delay is 1ms)")
	require.Len(t, resp.ToolCalls, 1)
	assert.Equal(t, "get_weather", resp.ToolCalls[0].Name)
	assert.Equal(t, "tool_calls", resp.FinishReason)
	l := ledger(t, pl, "r2")
	assert.Equal(t, runtime.Ledger{InputTokens: 1230, OutputTokens: 18, USD: l.USD, Calls: 1}, l)
	assert.InDelta(t, 1230*0.4/1e6+18*1.6/1e6, l.USD, 1e-12)
	assert.Equal(t, 0, an.Requests())
}

// An Anthropic stream that fails after message_start, before any output,
// is retried (nothing reached the consumer), and the meter charges the
// input the failed attempt announced with the one that answered; the
// response's usage is the answering attempt's.
func TestFailedAnthropicAttemptIsChargedItsInput(t *testing.T) {
	oa := ssetest.New(t)
	an := ssetest.New(t, ssetest.Reply{Body: transcript(t, "anthropic", "error_first.sse")}, ssetest.Reply{Body: transcript(t, "anthropic", "text.sse")})
	pl := load(t, oa, an, `[{use: "meter"}, {use: "retry", max_attempts: 2, initial_delay: "1ms"}]`)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r-failed"})
	resp, err := pl.Complete(ctx, runtime.ChatRequest{Model: "backup", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", resp.Text)
	assert.Equal(t, 2, an.Requests(), "retried: message_start alone commits nothing")
	assert.Equal(t, runtime.Usage{InputTokens: 472, OutputTokens: 15}, resp.Usage, "the attempt that answered")
	assert.Equal(t, []runtime.Charge{{Model: "backup", Usage: runtime.Usage{InputTokens: 12}},
		{Model: "backup", Usage: runtime.Usage{InputTokens: 472, OutputTokens: 15}}}, resp.Charges, "both attempts billed")
	l := ledger(t, pl, "r-failed")
	assert.Equal(t, int64(12+472), l.InputTokens, "the failed attempt's announced input is charged")
	assert.InDelta(t, (12+472)*3.0/1e6+15*15.0/1e6, l.USD, 1e-12)
}

func TestMidStreamFailureIsNeitherRetriedNorFallenOver(t *testing.T) {
	oa := ssetest.New(t, ssetest.Reply{Body: transcript(t, "openai", "error_mid_stream.sse")})
	an := ssetest.New(t)
	pl := load(t, oa, an, resilient)
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "q"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mid-stream after 2 deltas")
	assert.Equal(t, "The answer is", resp.Text)
	assert.Equal(t, 1, oa.Requests())
	assert.Equal(t, 0, an.Requests())
}

func TestPermanentErrorFailsFast(t *testing.T) {
	oa := ssetest.New(t, ssetest.Reply{Status: 400, Body: transcript(t, "openai", "400_context_length.json")})
	an := ssetest.New(t)
	pl := load(t, oa, an, resilient)
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "q"}}})
	require.Error(t, err)
	assert.Equal(t, "permanent", runtime.KindOf(err))
	assert.Equal(t, 1, oa.Requests(), "no retry")
	assert.Equal(t, 0, an.Requests(), "no fallback")
}

func TestLoadFailsWithoutTheKeyVariable(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p
models: primary: {provider: "openai", model: "gpt-4.1-mini", api_key_env: "AGENTC_TEST_NEVER_SET_KEY"}
`), 0o644))
	_, err := agentc.Load(context.Background(), dir, runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `model "primary": environment variable AGENTC_TEST_NEVER_SET_KEY (its api_key_env) is not set`)
}

// Close closes the idle connections of the clients Build made: without it
// each provider's transport kept its keep-alive connection, and the two
// goroutines serving it, until the transport's idle timeout (90s), for
// every pipeline a host built and closed (a reload, a test).
func TestCloseReleasesProviderConnections(t *testing.T) {
	oa := ssetest.New(t, ssetest.Reply{Body: transcript(t, "openai", "text.sse")})
	an := ssetest.New(t, ssetest.Reply{Body: transcript(t, "anthropic", "text.sse")})
	pl := load(t, oa, an, `[{use: "meter"}]`)
	for _, model := range []string{"primary", "backup"} {
		resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: model, Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
		require.NoError(t, err)
		assert.Equal(t, "Hello! How can I help you today?", resp.Text)
	}
	assert.Equal(t, 1, oa.Open(), "the openai client keeps its connection alive")
	assert.Equal(t, 1, an.Open(), "the anthropic client keeps its connection alive")
	require.NoError(t, pl.Close())
	assert.Eventually(t, func() bool { return oa.Open() == 0 && an.Open() == 0 }, 5*time.Second, 10*time.Millisecond,
		"open connections after Close: openai %d, anthropic %d", oa.Open(), an.Open())
}
