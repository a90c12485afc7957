package filecheck

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture lays out a root and an outside directory:
//
//	root/docs/a.md            small file
//	root/docs/big.md          2 KiB
//	root/docs/sub/            directory
//	root/notes.txt
//	root/file.key
//	root/link_in.md        -> root/docs/a.md
//	root/alias.md          -> root/file.key
//	root/link_file_out.md  -> outside/secret.md
//	root/link_dir_out      -> outside
//	root/dangling.md       -> outside/missing.md
//	root/rel_out           -> ../outside (relative link)
//	outside/secret.md
type fixture struct {
	root, outside string // real paths
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	f := fixture{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{f.root + "/docs/sub", f.outside} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	write := func(p string, n int) {
		require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("x", n)), 0o644))
	}
	write(f.root+"/docs/a.md", 10)
	write(f.root+"/docs/big.md", 2048)
	write(f.root+"/notes.txt", 10)
	write(f.root+"/file.key", 10)
	write(f.outside+"/secret.md", 10)
	links := map[string]string{
		"link_in.md":       f.root + "/docs/a.md",
		"alias.md":         f.root + "/file.key",
		"link_file_out.md": f.outside + "/secret.md",
		"link_dir_out":     f.outside,
		"dangling.md":      f.outside + "/missing.md",
		"rel_out":          "../outside",
	}
	for name, target := range links {
		require.NoError(t, os.Symlink(target, filepath.Join(f.root, name)))
	}
	return f
}

func TestCheck(t *testing.T) {
	f := newFixture(t)
	c, err := New(Config{Roots: []string{f.root}, Extensions: []string{"md"}, MaxBytes: 1024})
	require.NoError(t, err)

	tests := []struct {
		name    string
		path    string
		want    string // resolved path relative to root; used when wantErr is ""
		wantErr string
	}{
		{"relative file", "docs/a.md", "docs/a.md", ""},
		{"absolute inside", f.root + "/docs/a.md", "docs/a.md", ""},
		{"dot segments inside", "docs/./sub/../a.md", "docs/a.md", ""},
		{"upper-case extension", "docs/NEW.MD", "docs/NEW.MD", ""},
		{"new file", "docs/new.md", "docs/new.md", ""},
		{"new file in new dirs", "docs/x/y/z.md", "docs/x/y/z.md", ""},
		{"symlink inside root", "link_in.md", "docs/a.md", ""},
		{"backslash traversal", `..\..\etc\passwd.md`, "", "backslash"},
		{"backslash inside a name", `docs\a.md`, "", "backslash"},
		{"percent-encoded dot-dot", "%2e%2e/%2E%2E/etc/passwd.md", "", "percent-encoded"},
		{"percent-encoded slash", "docs%2f..%2f..%2fx.md", "", "percent-encoded"},
		{"double-encoded", "%252e%252e/x.md", "", "percent-encoded"},
		{"tilde home", "~/.ssh/id.md", "", `"~"`},
		{"tilde user", "~root/x.md", "", `"~"`},
		{"newline", "docs/a.md\n", "", "control character"},

		{"parent traversal", "../outside/secret.md", "", "escapes the allowed roots"},
		{"deep traversal", "docs/../../outside/secret.md", "", "escapes the allowed roots"},
		{"many dots", "docs/sub/../../../../../../etc/passwd", "", "escapes the allowed roots"},
		{"absolute outside", "/etc/passwd", "", "escapes the allowed roots"},
		{"absolute outside md", f.outside + "/secret.md", "", "escapes the allowed roots"},
		{"root prefix trick", f.root + "-evil/x.md", "", "escapes the allowed roots"},
		{"file symlink out", "link_file_out.md", "", "symlink leads outside"},
		{"dir symlink out", "link_dir_out/secret.md", "", "symlink leads outside"},
		{"new file under dir symlink out", "link_dir_out/new.md", "", "symlink leads outside"},
		{"relative symlink out", "rel_out/secret.md", "", "symlink leads outside"},
		{"dot-dot after symlink", "link_dir_out/../root/docs/a.md", "", `".." after a symlink`},
		{"dangling symlink", "dangling.md", "", "dangling symlink"},
		{"file as parent", "docs/a.md/x.md", "", "a parent is not a directory"},
		{"extension", "notes.txt", "", `extension ".txt" not allowed`},
		{"real extension behind link", "alias.md", "", `extension ".key" not allowed`},
		{"directory without extension", "docs/sub", "", "extension"},
		{"too big", "docs/big.md", "", "file is 2048 bytes, over the limit of 1024"},
		{"nul byte", "docs/a.md\x00.txt", "", "nul byte"},
		{"empty", "", "", "empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Check(tt.path)
			if tt.wantErr != "" {
				var denied *DeniedError
				require.ErrorAs(t, err, &denied)
				assert.Contains(t, denied.Reason, tt.wantErr)
				assert.Equal(t, tt.path, denied.Path)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(f.root, tt.want), got)
		})
	}
}

func TestCheckMustExistAndDirectories(t *testing.T) {
	f := newFixture(t)
	c, err := New(Config{Roots: []string{f.root}, MustExist: true})
	require.NoError(t, err)

	_, err = c.Check("docs/missing.md")
	var denied *DeniedError
	require.ErrorAs(t, err, &denied)
	assert.Equal(t, "file does not exist", denied.Reason)

	got, err := c.Check("docs/sub")
	require.NoError(t, err, "directories pass when no extension list is set")
	assert.Equal(t, f.root+"/docs/sub", got)

	got, err = c.Check("docs/big.md")
	require.NoError(t, err, "no size limit by default")
	assert.Equal(t, f.root+"/docs/big.md", got)

	got, err = c.Check(".")
	require.NoError(t, err)
	assert.Equal(t, f.root, got)
}

func TestCheckSeveralRoots(t *testing.T) {
	f := newFixture(t)
	c, err := New(Config{Roots: []string{f.root + "/docs", f.outside}})
	require.NoError(t, err)

	got, err := c.Check("a.md")
	require.NoError(t, err, "relative paths use the first root")
	assert.Equal(t, f.root+"/docs/a.md", got)

	got, err = c.Check(f.outside + "/secret.md")
	require.NoError(t, err)
	assert.Equal(t, f.outside+"/secret.md", got)

	_, err = c.Check(f.root + "/notes.txt")
	assert.Error(t, err, "the parent of a root is outside")
}

func TestCheckRootThroughSymlink(t *testing.T) {
	f := newFixture(t)
	link := filepath.Join(filepath.Dir(f.root), "root_link")
	require.NoError(t, os.Symlink(f.root, link))
	c, err := New(Config{Roots: []string{link}})
	require.NoError(t, err)

	got, err := c.Check(link + "/docs/a.md")
	require.NoError(t, err)
	assert.Equal(t, f.root+"/docs/a.md", got)
	got, err = c.Check(f.root + "/docs/a.md")
	require.NoError(t, err, "the real path of a root is the same root")
	assert.Equal(t, f.root+"/docs/a.md", got)
}

func TestCheckRefusesSpecialFiles(t *testing.T) {
	f := newFixture(t)
	fifo := filepath.Join(f.root, "pipe.md")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	c, err := New(Config{Roots: []string{f.root}})
	require.NoError(t, err)
	_, err = c.Check("pipe.md")
	var denied *DeniedError
	require.ErrorAs(t, err, &denied)
	assert.Equal(t, "not a regular file", denied.Reason)
}

func TestNewErrors(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no roots", Config{}, "at least one root"},
		{"missing root", Config{Roots: []string{f.root + "/nope"}}, "no such file"},
		{"root is a file", Config{Roots: []string{f.root + "/notes.txt"}}, "not a directory"},
		{"empty extension", Config{Roots: []string{f.root}, Extensions: []string{" "}}, "empty extension"},
		{"negative size", Config{Roots: []string{f.root}, MaxBytes: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestDeniedErrorMessage(t *testing.T) {
	assert.Equal(t, `file_check: "../x" denied: path escapes the allowed roots`,
		(&DeniedError{Path: "../x", Reason: "path escapes the allowed roots"}).Error())
}

func BenchmarkCheck(b *testing.B) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	require.NoError(b, os.MkdirAll(dir+"/a/b", 0o755))
	require.NoError(b, os.WriteFile(dir+"/a/b/c.md", []byte("x"), 0o644))
	c, err := New(Config{Roots: []string{dir}, Extensions: []string{"md"}, MaxBytes: 1 << 20})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Check("a/b/c.md"); err != nil {
			b.Fatal(err)
		}
	}
}
