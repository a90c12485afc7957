package compiler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

func TestCompileLowersCachedRatesAndToolDescriptions(t *testing.T) {
	dir := writePolicy(t, `package p

models: {
	cached: {usd_per_mtok_in: 3, usd_per_mtok_out: 15, usd_per_mtok_cached: 0.3, usd_per_mtok_cache_write: 3.75,
		long_context: {above_input_tokens: 200000, usd_per_mtok_in: 6, usd_per_mtok_out: 22.5, usd_per_mtok_cached: 0.6, usd_per_mtok_cache_write: 7.5}}
	plain: {usd_per_mtok_in: 1}
}
tools: search: {description: "searches the web", args: {type: "object", properties: q: type: "string"}}
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.Empty(t, c.Diagnostics)
	b, err := plan.Encode(c.Plan)
	require.NoError(t, err)
	back, err := plan.Decode("mem", b)
	require.NoError(t, err, "the plan validates against the plan schema")
	require.NotNil(t, back.Models["cached"].USDPerMTokCached)
	assert.Equal(t, 0.3, *back.Models["cached"].USDPerMTokCached)
	require.NotNil(t, back.Models["cached"].USDPerMTokCacheWrite)
	assert.Equal(t, 3.75, *back.Models["cached"].USDPerMTokCacheWrite)
	assert.Nil(t, back.Models["plain"].USDPerMTokCached, "absent stays absent: cached tokens priced as input")
	assert.Nil(t, back.Models["plain"].USDPerMTokCacheWrite)
	cached, write := 0.6, 7.5
	assert.Equal(t, &plan.LongContext{AboveInputTokens: 200000, USDPerMTokIn: 6, USDPerMTokOut: 22.5, USDPerMTokCached: &cached, USDPerMTokCacheWrite: &write},
		back.Models["cached"].LongContext)
	assert.Nil(t, back.Models["plain"].LongContext)
	assert.Equal(t, "searches the web", back.Tools["search"].Description)

	bad := writePolicy(t, `package p

models: m: {usd_per_mtok_cached: -1, usd_per_mtok_cache_write: -1}
tools: t: {description: ""}
`)
	c, err = Compile(context.Background(), []string{bad}, Options{})
	require.NoError(t, err)
	var rules []string
	for _, d := range c.Diagnostics {
		rules = append(rules, d.Rule)
	}
	assert.Equal(t, []string{"schema/invalid-value", "schema/invalid-value", "schema/invalid-value"}, rules)
}
