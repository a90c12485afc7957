package textdist

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"retry", "retry", 0}, {"retyr", "retry", 1}, {"retri", "retry", 1},
		{"ammount", "amount", 1}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"ammount", []string{"amount", "approved_by"}, "amount"},
		{"x", []string{"amount"}, ""},
		{"amount", []string{"amount"}, ""}, // the name itself is no suggestion
		{"trial", []string{"include_args", "sink", "trail"}, "trail"},
		{"OK", []string{"failed", "ok"}, "ok"}, // case only: too many edits for a name this short
	} {
		if got := Closest(tc.name, tc.candidates); got != tc.want {
			t.Errorf("Closest(%q, %q) = %q, want %q", tc.name, tc.candidates, got, tc.want)
		}
	}
}

func TestPathHint(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "support"), 0o755))
	assert.Equal(t, fmt.Sprintf("; did you mean %q?", filepath.Join(dir, "support")), PathHint(filepath.Join(dir, "suport")))
	assert.Empty(t, PathHint(filepath.Join(dir, "payments")), "nothing near")
	assert.Empty(t, PathHint(filepath.Join(dir, "nodir", "suport")), "a directory that does not exist")
}
