package compiler

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

func TestCompileLowersProviderModels(t *testing.T) {
	dir := writePolicy(t, `package p

models: {
	primary: {provider: "openai", model: "gpt-4.1-mini", api_key_env: "OPENAI_API_KEY", usd_per_mtok_in: 0.4, usd_per_mtok_out: 1.6}
	local: {provider: "openai", model: "llama3", base_url: "http://127.0.0.1:11434/v1"}
	claude: {provider: "anthropic", model: "claude-sonnet-4-5", api_key_env: "ANTHROPIC_API_KEY", max_tokens: 2048}
}
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.Empty(t, c.Diagnostics)
	b, err := plan.Encode(c.Plan)
	require.NoError(t, err)
	back, err := plan.Decode("mem", b)
	require.NoError(t, err, "the plan schema accepts the provider fields")
	assert.Equal(t, plan.Model{USDPerMTokIn: 0.4, USDPerMTokOut: 1.6, Provider: "openai", ID: "gpt-4.1-mini", APIKeyEnv: "OPENAI_API_KEY"}, back.Models["primary"])
	assert.Equal(t, plan.Model{Provider: "openai", ID: "llama3", BaseURL: "http://127.0.0.1:11434/v1"}, back.Models["local"])
	assert.Equal(t, plan.Model{Provider: "anthropic", ID: "claude-sonnet-4-5", APIKeyEnv: "ANTHROPIC_API_KEY", MaxTokens: 2048}, back.Models["claude"])
}

func TestVetChecksProviderFields(t *testing.T) {
	for _, tc := range []struct {
		name, models string
		rule, msg    string
		line, col    int
	}{
		{"unknown provider", `m: {provider: "opnai", model: "x", api_key_env: "K"}`,
			"schema/invalid-value", `unknown provider "opnai" (known: anthropic, openai); did you mean "openai"?`, 3, 23},
		{"model required", `m: {provider: "openai", api_key_env: "K"}`,
			"schema/missing-field", "model", 3, 0},
		{"fields need a provider", `m: {model: "gpt-4.1", usd_per_mtok_in: 1}`,
			"schema/missing-field", "models.m.model needs provider (one of anthropic, openai)", 3, 20},
		{"key at the default endpoint", `m: {provider: "anthropic", model: "claude"}`,
			"schema/missing-field", "provider anthropic at its default endpoint needs api_key_env", 3, 23},
		{"key in place of a variable", `m: {provider: "openai", model: "x", api_key_env: "sk-live-1234567890abcdef"}`,
			"schema/invalid-value", "must name an environment variable", 3, 58},
		{"hex key in place of a variable", `m: {provider: "openai", model: "x", api_key_env: "d428fc11ed3fc4326beedaad8207f743"}`,
			"schema/invalid-value", "never hold the key itself", 3, 58},
		{"a name holding a dot is quoted", `"gpt-4.1": {provider: "opnai", model: "gpt-4.1", api_key_env: "K"}`,
			"schema/invalid-value", `models."gpt-4.1".provider: unknown provider "opnai"`, 3, 31},
		{"credentials in base_url", `m: {provider: "openai", model: "x", base_url: "https://user:sk-secret@example.com/v1"}`,
			"schema/invalid-value", "must not carry credentials", 3, 55},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writePolicy(t, "package p\n\nmodels: "+tc.models+"\n")
			c, err := Compile(context.Background(), []string{dir}, Options{})
			require.NoError(t, err)
			require.Nil(t, c.Plan)
			require.NotEmpty(t, c.Diagnostics)
			d := c.Diagnostics[0]
			assert.Equal(t, tc.rule, d.Rule)
			assert.Contains(t, d.Message, tc.msg)
			assert.Equal(t, tc.line, d.Pos.Line)
			if tc.col > 0 {
				assert.Equal(t, tc.col, d.Pos.Col)
			}
			for _, d := range c.Diagnostics {
				assert.False(t, strings.Contains(d.Message, "sk-"), "a diagnostic repeats a secret: %s", d.Message)
			}
		})
	}
}
