package redact_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// streamPatterns streams deltas from a model through a redact layer configured with config
// and returns the texts of the deltas that got through.
func streamPatterns(t *testing.T, config string, deltas []string) []string {
	t.Helper()
	model := rt.NewModel(rt.Response{Deltas: deltas})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	var got []string
	_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
		got = append(got, d.Text)
		return true
	})
	require.NoError(t, err)
	return got
}

// TestConfiguredPatternOverLineBreakInOutput: a configured pattern that matches over a line
// break masks the model's output as it masks the same text sent to the model, whether the
// text arrives in one delta or cut anywhere. Each line was released and masked alone
// unless a line of letters and digits would complete a match: "account number:" then
// "12345678" on the next line went out in clear.
func TestConfiguredPatternOverLineBreakInOutput(t *testing.T) {
	config := `{"defaults": false, "patterns": ["ACCT-\\s*[0-9]{6}", "tok_[a-z]+", "(?i)account number:\\s*[0-9]{8}"]}`
	for text, want := range map[string]string{
		"Your account number:\n12345678, thanks": "Your [REDACTED:pattern-2], thanks",
		"your account ACCT-\n123456 ok":          "your account [REDACTED:pattern-0] ok",
		"ACCT-\n\n\n123456\nnext\n":              "[REDACTED:pattern-0]\nnext\n",
	} {
		for cut := 0; cut < len(text); cut++ {
			deltas := []string{text}
			if cut > 0 {
				deltas = []string{text[:cut], text[cut:]}
			}
			assert.Equal(t, want, strings.Join(streamPatterns(t, config, deltas), ""), "%q cut at %d", text, cut)
		}
	}
}
