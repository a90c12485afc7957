package serve

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// cacheWrites is an Anthropic stream whose prompt wrote 100,000 tokens to
// one-hour cache entries and 200,000 to five-minute ones, the split its
// usage reports in cache_creation.
var cacheWrites = strings.Replace(anthropicStopping("end_turn"), `"usage":{"input_tokens":10,"output_tokens":1}`,
	`"usage":{"input_tokens":1000,"cache_creation_input_tokens":300000,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":200000,"ephemeral_1h_input_tokens":100000},"output_tokens":1}`, 1)

// TestMeterPricesOneHourCacheWrites: Anthropic bills a write to a one-hour
// cache entry at twice its input price, a five-minute one at 1.25 times.
// The meter charges each part of the cache_creation split at its own
// price: usd_per_mtok_cache_write_1h, and usd_per_mtok_cache_write for the
// rest; the Anthropic client gets the split back.
func TestMeterPricesOneHourCacheWrites(t *testing.T) {
	decls := weatherDecl + "\nmodels: backup: {usd_per_mtok_cache_write: 3.75, usd_per_mtok_cache_write_1h: 6}"
	g := newGatewayWith(t, decls, `{use: "meter", budget: usd: 100}`, nil, []reply{{body: cacheWrites}})
	m, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	require.NoError(t, err)
	assert.EqualValues(t, 300000, m.Usage.CacheCreationInputTokens)
	assert.EqualValues(t, 1000, m.Usage.InputTokens)
	assert.EqualValues(t, 100000, m.Usage.CacheCreation.Ephemeral1hInputTokens, m.RawJSON())
	assert.EqualValues(t, 200000, m.Usage.CacheCreation.Ephemeral5mInputTokens, m.RawJSON())
	// 1,000 input at 3, 200,000 written at 3.75, 100,000 at 6, 3 output at 15.
	assert.Contains(t, g.metrics(t), `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"} 1.353045`+"\n")
}

// TestOneHourCacheWritesWithoutTheirPrice: a model that declares no
// usd_per_mtok_cache_write_1h prices one-hour writes at
// usd_per_mtok_cache_write, as every write was priced before the split.
func TestOneHourCacheWritesWithoutTheirPrice(t *testing.T) {
	decls := weatherDecl + "\nmodels: backup: usd_per_mtok_cache_write: 3.75"
	g := newGatewayWith(t, decls, `{use: "meter", budget: usd: 100}`, nil, []reply{{body: cacheWrites}})
	code, _, body := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "backup", "max_tokens": 64, "stream": true, "messages": [{"role": "user", "content": "hi"}]}`))
	require.Equal(t, 200, code, body)
	start := strings.SplitN(strings.SplitN(body, "data: ", 2)[1], "\n", 2)[0]
	assert.EqualValues(t, 100000, gjson.Get(start, "message.usage.cache_creation.ephemeral_1h_input_tokens").Int(), start)
	// 1,000 input at 3, 300,000 written at 3.75, 3 output at 15.
	assert.Contains(t, g.metrics(t), `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"} 1.128045`+"\n")
}
