package dsl

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An editor's lock file beside the policy (Emacs's ".#policy.cue", a
// symlink to nowhere while a buffer has unsaved edits) and files the cue
// tool ignores ("_scratch.cue") are not part of the policy: reading the
// directory used to fail on the lock ("cannot read file"), so a vet or a
// reload failed whenever the policy was open in an editor.
func TestEditorFilesAreNotPartOfThePolicy(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package p\n\nmodels: m: {provider: \"openai\", model: \"gpt-4.1-mini\"}\nchains: chat: []\n"), 0o644))
	require.NoError(t, os.Symlink("user@host.1234:1700000000", filepath.Join(dir, ".#policy.cue")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "_scratch.cue"), []byte("this is { not cue"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy_test.cue"), []byte("package p\n"), 0o644))

	files, err := ResolvePaths([]string{dir})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "policy.cue")}, files)

	pol, diags, err := Load(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	assert.False(t, diags.HasErrors(), "%v", diags)
	require.NotNil(t, pol)
}

func TestIsPolicyFileName(t *testing.T) {
	for name, want := range map[string]bool{
		"policy.cue": true, "models.cue": true,
		".#policy.cue": false, ".policy.cue": false, "_draft.cue": false,
		"policy_test.cue": false, "policy.cue~": false, "plan.json": false,
	} {
		assert.Equal(t, want, IsPolicyFileName(name), name)
	}
}
