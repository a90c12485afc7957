//go:build unix

package filecheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHardLinkRefused: a hard link inside the roots to a file outside them is the same file
// under another name, which no path leads back to: a regular file with more than one name is
// refused, unless AllowHardLinks says the roots' links are trusted. A symlink to it was
// refused while the hard link let the outside file be read.
func TestHardLinkRefused(t *testing.T) {
	f := newFixture(t)
	hard := filepath.Join(f.root, "docs", "hard.md")
	require.NoError(t, os.Link(f.outside+"/secret.md", hard))

	c, err := New(Config{Roots: []string{f.root}})
	require.NoError(t, err)
	_, err = c.Check(hard)
	var denied *DeniedError
	require.ErrorAs(t, err, &denied)
	assert.Contains(t, denied.Reason, "hard link")
	_, err = c.Check(f.root + "/link_file_out.md")
	require.ErrorAs(t, err, &denied, "a symlink out is refused as before")

	// a file with one name, and a directory (which always has several), pass
	got, err := c.Check(f.root + "/docs/a.md")
	require.NoError(t, err)
	assert.Equal(t, f.root+"/docs/a.md", got)
	_, err = c.Check(f.root + "/docs")
	require.NoError(t, err)

	// a symlink inside the roots to the hard link is refused as the link itself
	require.NoError(t, os.Symlink(hard, f.root+"/to_hard.md"))
	_, err = c.Check(f.root + "/to_hard.md")
	require.ErrorAs(t, err, &denied)

	open, err := New(Config{Roots: []string{f.root}, AllowHardLinks: true})
	require.NoError(t, err)
	got, err = open.Check(hard)
	require.NoError(t, err)
	assert.Equal(t, hard, got)
}
