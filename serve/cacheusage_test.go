package serve

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCacheUsageIsWithheldAcrossTenants: the gateway calls a provider with
// one account's key for every tenant, and the provider's prompt cache is
// the account's: the cached tokens a tenant's usage reported told it
// whether another tenant had sent the same prefix. With keys of more than
// one tenant the figures are withheld (the input counted whole, as if
// nothing had been read from the cache), on every route, whole and
// streamed; CacheUsageReport reports them as the provider gave them.
func TestCacheUsageIsWithheldAcrossTenants(t *testing.T) {
	body := transcript(t, "openai", "parallel_tool_calls.sse")
	body = strings.Replace(body, `"cached_tokens":0`, `"cached_tokens":64`, 1)
	const tenants = `settings: allow_undeclared_tools: true
keys: other: {sha256: "` + "0000000000000000000000000000000000000000000000000000000000000000" + `", tenant: "globex"}`
	for _, mode := range []CacheUsage{"", CacheUsageReport} {
		replies := make([]reply, 5)
		for i := range replies {
			replies[i] = reply{body: body}
		}
		g := newGatewayWith(t, tenants, `{use: "tracing"}`, replies, nil, func(o *Options) { o.CacheUsage = mode })
		want := int64(0)
		if mode == CacheUsageReport {
			want = 64
		}
		ctx := context.Background()
		p := openai.ChatCompletionNewParams{Model: "primary", Tools: []openai.ChatCompletionToolUnionParam{weatherTool},
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
		c, err := g.openai(t).Chat.Completions.New(ctx, p)
		require.NoError(t, err)
		assert.EqualValues(t, 82, c.Usage.PromptTokens, mode)
		assert.EqualValues(t, want, c.Usage.PromptTokensDetails.CachedTokens, mode)

		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := g.openai(t).Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		require.NoError(t, s.Err())
		assert.EqualValues(t, 82, acc.Usage.PromptTokens, mode)
		assert.EqualValues(t, want, acc.Usage.PromptTokensDetails.CachedTokens, mode)

		ap := anthropic.MessageNewParams{Model: "primary", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			Tools:    []anthropic.ToolUnionParam{anthropicWeatherTool}}
		m, err := g.anthropic(t).Messages.New(ctx, ap)
		require.NoError(t, err)
		assert.EqualValues(t, want, m.Usage.CacheReadInputTokens, mode)
		assert.EqualValues(t, 82-want, m.Usage.InputTokens, mode)

		as := g.anthropic(t).Messages.NewStreaming(ctx, ap)
		var msg anthropic.Message
		for as.Next() {
			require.NoError(t, msg.Accumulate(as.Current()))
		}
		require.NoError(t, as.Err())
		assert.EqualValues(t, want, msg.Usage.CacheReadInputTokens, mode)
		assert.EqualValues(t, 82-want, msg.Usage.InputTokens, mode)

		r, err := g.openai(t).Responses.New(ctx, responses.ResponseNewParams{Model: "primary",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, Tools: []responses.ToolUnionParam{rsWeatherTool}})
		require.NoError(t, err)
		assert.EqualValues(t, 82, r.Usage.InputTokens, mode)
		assert.EqualValues(t, want, r.Usage.InputTokensDetails.CachedTokens, mode)
	}
}

// TestNewRefusesUnknownCacheUsage: a CacheUsage other than the three is
// refused by New, before the policy is read, in the words agentc serve's
// flag shows.
func TestNewRefusesUnknownCacheUsage(t *testing.T) {
	_, err := New(context.Background(), Options{Source: cueSource(filepath.Join(t.TempDir(), "missing")), CacheUsage: "hide"})
	require.Error(t, err)
	assert.Equal(t, `serve: -cacheusage (Options.CacheUsage) must be auto, report or withhold, got "hide"`, err.Error())
	var oe *OptionsError
	assert.ErrorAs(t, err, &oe)
}
