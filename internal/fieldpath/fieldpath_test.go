package fieldpath_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/fieldpath"
)

func TestLabelQuotesWhatIsNotAnIdentifier(t *testing.T) {
	for name, want := range map[string]string{
		"primary": "primary", "max_tokens": "max_tokens", "#Def": "#Def", "a1": "a1",
		"gpt-4.1": `"gpt-4.1"`, "claude.s": `"claude.s"`, "1st": `"1st"`, "": `""`, "a b": `"a b"`,
	} {
		assert.Equal(t, want, fieldpath.Label(name), name)
	}
	assert.Equal(t, `models."gpt-4.1"`, fieldpath.Join("models", "gpt-4.1"))
	assert.Equal(t, "models", fieldpath.Join("", "models"))
}

func TestSplitReadsWhatLabelWrites(t *testing.T) {
	steps, ok := fieldpath.Split(`models."gpt-4.1"[1].content`)
	require.True(t, ok)
	assert.Equal(t, []fieldpath.Step{{Label: "models"}, {Label: "gpt-4.1"}, {Index: 1, IsIndex: true}, {Label: "content"}}, steps)
	assert.Equal(t, []string{"steps", "0", "tool", "a.b"}, fieldpath.Labels(`steps[0].tool."a.b"`))
	assert.Equal(t, []string{}, fieldpath.Labels(""))
	for _, bad := range []string{`models."gpt`, `a[x]`, `a..b`, `a.`, `"a"b`, `a[-1]`, `$`, `the policy`, `gpt-4.1`} {
		_, ok := fieldpath.Split(bad)
		assert.False(t, ok, bad)
	}
}
