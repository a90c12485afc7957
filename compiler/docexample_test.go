package compiler_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
)

// TestCheckpointsDocExampleVets compiles the state example that opens
// docs/checkpoints.md as `agentc vet` does: the page must show a policy
// that vets clean.
func TestCheckpointsDocExampleVets(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "docs", "checkpoints.md"))
	require.NoError(t, err)
	text := string(page)
	start := strings.Index(text, "```cue\nstate: {")
	require.GreaterOrEqual(t, start, 0, "the page's state example")
	text = text[start+len("```cue\n"):]
	example := text[:strings.Index(text, "```")]
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package example\n\n"+example), 0o644))
	c, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
	require.NoError(t, err)
	assert.False(t, c.Diagnostics.HasErrors(), "%v", c.Diagnostics)
}
