package filecheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Config configures a Checker.
type Config struct {
	// Roots are the directories paths must stay inside; at least one is required, and each
	// must exist. Relative paths are resolved against the first.
	Roots []string
	// Extensions lists the allowed file extensions ("md" or ".md", case-insensitive); empty
	// allows any. With a list, a directory (which has no extension) is refused.
	Extensions []string
	// MaxBytes is the largest allowed size of an existing regular file; 0 means no limit.
	MaxBytes int64
	// MustExist refuses paths that do not name an existing file or directory.
	MustExist bool
	// AllowHardLinks admits a regular file with more than one name (hard links). By default
	// one is refused: a hard link inside the roots may be another name of a file outside
	// them, and nothing leads from one name to the others.
	AllowHardLinks bool
}

// DeniedError reports a path the policy refuses.
type DeniedError struct {
	// Path is the path as given to Check.
	Path string
	// Reason says why, in lower case ("path escapes the allowed roots").
	Reason string
}

// Error returns "file_check: <path> denied: <reason>".
func (e *DeniedError) Error() string {
	return fmt.Sprintf("file_check: %q denied: %s", e.Path, e.Reason)
}

// Checker vets paths. It is safe for concurrent use.
type Checker struct {
	lexRoots  []string // absolute, cleaned, as configured
	realRoots []string // the same with symlinks resolved
	exts      []string // lower case, with the dot
	maxBytes  int64
	mustExist bool
	hardLinks bool // AllowHardLinks
}

// New builds a Checker. It fails when there is no root, when a root does not exist or is not
// a directory, when an extension is empty, or when MaxBytes is negative.
func New(cfg Config) (*Checker, error) {
	if len(cfg.Roots) == 0 {
		return nil, errors.New("file_check: at least one root is required")
	}
	if cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("file_check: max_bytes %d is negative", cfg.MaxBytes)
	}
	c := &Checker{maxBytes: cfg.MaxBytes, mustExist: cfg.MustExist, hardLinks: cfg.AllowHardLinks}
	for _, root := range cfg.Roots {
		if root == "" || strings.ContainsRune(root, 0) {
			return nil, fmt.Errorf("file_check: invalid root %q", root)
		}
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, fmt.Errorf("file_check: root %q: %w", root, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("file_check: root %q: %w", root, err)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("file_check: root %q: %w", root, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("file_check: root %q is not a directory", root)
		}
		c.lexRoots = append(c.lexRoots, abs)
		c.realRoots = append(c.realRoots, real)
	}
	for _, ext := range cfg.Extensions {
		ext = strings.ToLower(strings.TrimSpace(ext))
		if ext == "" || ext == "." {
			return nil, errors.New("file_check: empty extension")
		}
		if !strings.HasPrefix(ext, ".") {
			ext = "." + ext
		}
		c.exts = append(c.exts, ext)
	}
	return c, nil
}

// Check vets path and returns its real path (absolute, cleaned, symlinks resolved). A refusal
// is a *DeniedError: an empty path or one with a NUL byte, a path another reader could take
// for a different one (see ambiguousPath), a path outside every root (lexically
// or once symlinks are resolved), a dangling symlink, a parent that is not a directory, a
// disallowed extension (on the given name or on the real file), a missing file with
// MustExist, a file over MaxBytes, a regular file with more than one name (a hard link, see
// linkCount) without AllowHardLinks, or something other than a regular file or a directory.
// Other I/O failures (a permission error while resolving) are returned wrapped.
func (c *Checker) Check(path string) (string, error) {
	deny := func(reason string) (string, error) {
		return "", &DeniedError{Path: path, Reason: reason}
	}
	if path == "" {
		return deny("empty path")
	}
	if strings.ContainsRune(path, 0) {
		return deny("nul byte in path")
	}
	if reason := ambiguousPath(path); reason != "" {
		return deny(reason)
	}
	p := path
	if !filepath.IsAbs(p) {
		p = c.lexRoots[0] + string(filepath.Separator) + p
	}
	if dotDotAfterSymlink(p) {
		return deny(`".." after a symlink`)
	}
	p = filepath.Clean(p)
	if !withinAny(c.lexRoots, p) && !withinAny(c.realRoots, p) {
		return deny("path escapes the allowed roots")
	}

	real, exists, reason, err := resolve(p)
	if err != nil {
		return "", fmt.Errorf("file_check: resolve %q: %w", path, err)
	}
	if reason != "" {
		return deny(reason)
	}
	if !withinAny(c.realRoots, real) {
		return deny("symlink leads outside the allowed roots")
	}
	if !c.extAllowed(p) || !c.extAllowed(real) {
		return deny(fmt.Sprintf("extension %q not allowed", filepath.Ext(real)))
	}
	if !exists {
		if c.mustExist {
			return deny("file does not exist")
		}
		return real, nil
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("file_check: stat %q: %w", path, err)
	}
	switch {
	case fi.Mode().IsRegular():
		if c.maxBytes > 0 && fi.Size() > c.maxBytes {
			return deny(fmt.Sprintf("file is %d bytes, over the limit of %d", fi.Size(), c.maxBytes))
		}
		if n := linkCount(fi); n > 1 && !c.hardLinks {
			return deny(fmt.Sprintf("hard link: the file has %d names, and the others may lie outside the allowed roots", n))
		}
	case fi.IsDir():
	default:
		return deny("not a regular file")
	}
	return real, nil
}

func (c *Checker) extAllowed(p string) bool {
	if len(c.exts) == 0 {
		return true
	}
	return slices.Contains(c.exts, strings.ToLower(filepath.Ext(p)))
}

// resolve returns the real path of p: the deepest existing ancestor (p itself when it exists)
// with its symlinks resolved, joined with the components that do not exist yet.
func resolve(p string) (real string, exists bool, reason string, err error) {
	cur := p
	var missing []string
	for {
		_, err := os.Lstat(cur)
		if err == nil {
			break
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return "", false, "a parent is not a directory", nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", false, "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", false, "no existing ancestor", nil
		}
		missing = append(missing, filepath.Base(cur))
		cur = parent
	}
	resolved, err := filepath.EvalSymlinks(cur)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, "dangling symlink", nil
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return "", false, "a parent is not a directory", nil
		}
		return "", false, "", err
	}
	if len(missing) > 0 {
		fi, err := os.Stat(resolved)
		if err != nil {
			return "", false, "", err
		}
		if !fi.IsDir() {
			return "", false, "a parent is not a directory", nil
		}
	}
	slices.Reverse(missing)
	return filepath.Join(append([]string{resolved}, missing...)...), len(missing) == 0, "", nil
}

// dotDotAfterSymlink reports whether a ".." in p steps back over a symlink. Lexically
// "link/.." is the directory holding link, but the system resolves it to the parent of the
// link's target; the two must not be confused, so such paths are refused.
func dotDotAfterSymlink(p string) bool {
	elems := strings.Split(filepath.ToSlash(p), "/")
	if !slices.Contains(elems, "..") {
		return false
	}
	var prefix []string
	for _, e := range elems {
		switch e {
		case "", ".":
			continue
		case "..":
			if len(prefix) > 0 {
				fi, err := os.Lstat(string(filepath.Separator) + filepath.Join(prefix...))
				if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
					return true
				}
				prefix = prefix[:len(prefix)-1]
			}
		default:
			prefix = append(prefix, e)
		}
	}
	return false
}

func withinAny(roots []string, p string) bool {
	for _, r := range roots {
		if within(r, p) {
			return true
		}
	}
	return false
}

// within reports whether p is root or below it; both are absolute and clean.
func within(root, p string) bool {
	if p == root {
		return true
	}
	if !strings.HasSuffix(root, string(filepath.Separator)) {
		root += string(filepath.Separator)
	}
	return strings.HasPrefix(p, root)
}

// ambiguousPath says why path could name another file to a tool than the one
// checked, or "". The check reads a path as the operating system does, but a
// tool may not: one that takes a backslash for a separator (code written for
// Windows), decodes percent escapes (a path handed on in a URL) or expands a
// leading "~" would read `..\..\etc`, "%2e%2e/etc" or "~/.ssh" as a way out
// of the roots.
// Such paths, and control characters, are refused rather than guessed at.
func ambiguousPath(path string) string {
	if strings.ContainsRune(path, '\\') {
		return "backslash in path"
	}
	for i := 0; i < len(path); i++ {
		if b := path[i]; b < 0x20 || b == 0x7f {
			return "control character in path"
		}
	}
	lower := strings.ToLower(path)
	for _, esc := range []string{"%2e", "%2f", "%5c", "%00", "%25"} {
		if strings.Contains(lower, esc) {
			return "percent-encoded " + esc + " in path"
		}
	}
	if strings.HasPrefix(path, "~") {
		return `path starts with "~"`
	}
	return ""
}
