package filecheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCheck: a path the checker accepts resolves, symbolic links followed,
// inside its root.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"notes.md", "docs/a.md", "../etc/passwd", "/etc/passwd", "docs/../../x", "out/secret", "out",
		"docs/./a.md", "docs//a.md", "a\x00b", "....//....//etc", "%2e%2e/x", "docs/link/a", "~/x",
		"docs\\..\\..\\x", "./", ".", "", strings.Repeat("a/", 100) + "x",
	} {
		f.Add(s)
	}
	root := f.TempDir()
	outside := f.TempDir()
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	must(os.WriteFile(filepath.Join(root, "notes.md"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644))
	must(os.Symlink(outside, filepath.Join(root, "out")))
	must(os.Symlink(outside, filepath.Join(root, "docs", "link")))
	c, err := New(Config{Roots: []string{root}})
	must(err)
	realRoot, err := filepath.EvalSymlinks(root)
	must(err)
	inside := func(p string) bool {
		rel, err := filepath.Rel(realRoot, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got, err := c.Check(path)
		if err != nil {
			return
		}
		resolved := got
		if r, err := filepath.EvalSymlinks(got); err == nil {
			resolved = r
		} else if r, err := filepath.EvalSymlinks(filepath.Dir(got)); err == nil {
			resolved = filepath.Join(r, filepath.Base(got))
		}
		if !inside(resolved) {
			t.Fatalf("accepted %q as %q, which resolves to %q outside %q", path, got, resolved, realRoot)
		}
	})
}
