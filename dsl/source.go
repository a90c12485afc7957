package dsl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// ErrNotRegular is returned by ReadFile for a path that is not a regular
// file (a device, a FIFO, a socket, a directory), after following symbolic
// links.
var ErrNotRegular = errors.New("not a regular file")

// TooLargeError is returned by ReadFile for a file over its limit.
type TooLargeError struct {
	// Size is the file's size as reported by the file system; Limit is the
	// limit that was exceeded.
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	size, limit := e.sizes()
	return fmt.Sprintf("file is %s, larger than the %s limit", size, limit)
}

// sizes renders the size and the limit for a message. A file just over
// the limit rounds to the limit's own figure ("4.0 MiB, larger than the
// 4.0 MiB limit"); the two are then given in bytes.
func (e *TooLargeError) sizes() (size, limit string) {
	size, limit = sizeString(e.Size), sizeString(e.Limit)
	if size == limit {
		return fmt.Sprintf("%d bytes", e.Size), fmt.Sprintf("%s (%d bytes)", limit, e.Limit)
	}
	return size, limit
}

// ReadFile reads the regular file at path, at most limit bytes. The file is
// opened without blocking (a FIFO is refused instead of waiting for a
// writer), checked to be a regular file once open, and read through a
// bounded reader, so a file that grows while it is read, or lies about its
// size, cannot make ReadFile read more than limit+1 bytes. Errors are
// ErrNotRegular, a *TooLargeError, or the file system's error.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpen(f, limit)
}

// ReadFileIn reads the regular file name inside root, as ReadFile does. The
// name must be local (no absolute path, no `..` leaving root) and may not
// escape root through a symbolic link.
func ReadFileIn(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpen(f, limit)
}

func readOpen(f *os.File, limit int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	if st.Size() > limit {
		return nil, &TooLargeError{Size: st.Size(), Limit: limit}
	}
	// The file was opened non-blocking; a regular file ignores it.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Size: int64(len(b)), Limit: limit}
	}
	return b, nil
}

// readErrorText is the message for an error of ReadFile, without the path
// (diagnostics carry it already).
func readErrorText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// DataOptions configures LoadData.
type DataOptions struct {
	// Timeout bounds evaluation (default DefaultTimeout).
	Timeout time.Duration
	// MaxSize is the largest file read (default MaxFileSize).
	MaxSize int64
}

// LoadData reads a data file that is not a policy (a scenario, a test file)
// under the same bounds as a policy: a regular file of at most MaxSize
// bytes, UTF-8, nesting at most MaxNesting levels, and for CUE an
// evaluation within Timeout. A .json file is returned as read, once it is
// known to hold one JSON value that repeats no key of an object; a .cue file
// is evaluated on its own (no package, no schema) and returned as JSON,
// once it is known to leave no value incomplete and to write no optional
// field as data (CUE leaves one out of the JSON).
// Errors name the file, and the position when there is one.
func LoadData(ctx context.Context, path string, opts DataOptions) ([]byte, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = MaxFileSize
	}
	src, err := ReadFile(path, opts.MaxSize)
	if err != nil {
		var big *TooLargeError
		if errors.As(err, &big) {
			return nil, fmt.Errorf("%s: %w", path, big)
		}
		return nil, fmt.Errorf("%s: %s", path, readErrorText(err))
	}
	if p, ok := checkText(path, src); !ok {
		return nil, fmt.Errorf("%s: file is not UTF-8 text", p)
	}
	if filepath.Ext(path) != ".cue" {
		if err := checkJSON(path, src); err != nil {
			return nil, err
		}
		return src, nil
	}
	if sh := checkShape(path, src); sh.depth > MaxNesting {
		return nil, fmt.Errorf("%s: nesting deeper than %d levels", sh.depthAt, MaxNesting)
	} else if sh.chain > MaxChain {
		return nil, fmt.Errorf("%s: an expression chains more than %d operators and selectors", sh.chainAt, MaxChain)
	}
	var out []byte
	var evalErr error
	err = withDeadline(ctx, opts.Timeout, func() {
		defer func() {
			if r := recover(); r != nil {
				evalErr = fmt.Errorf("%s: evaluation failed: %v", path, r)
			}
		}()
		v := cuecontext.New().CompileBytes(src, cue.Filename(path))
		if err := v.Validate(cue.Concrete(true)); err != nil {
			evalErr = errors.New(placedDetails(v, err))
			return
		}
		if err := optionalFields(path, src); err != nil {
			evalErr = err
			return
		}
		if out, err = v.MarshalJSON(); err != nil {
			evalErr = fmt.Errorf("%s: %v", path, err)
		}
	})
	switch {
	case errors.Is(err, errDeadline):
		return nil, fmt.Errorf("%s: evaluation did not finish within %s; simplify the file", path, opts.Timeout)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, evalErr
}

// placedDetails renders err, an error of validating v, as
// cueerrors.Details does, each error followed by its positions; an error
// CUE gives no position (an incomplete disjunction, an incomplete _) is
// placed at the value its path names in v, else at its field.
func placedDetails(v cue.Value, err error) string {
	var b strings.Builder
	for _, e := range cueerrors.Errors(err) {
		text := strings.TrimSpace(cueerrors.Details(e, nil))
		if e.Position().IsValid() || len(e.InputPositions()) > 0 {
			b.WriteString(text + "\n")
			continue
		}
		// The path's labels are written as CUE writes them: a list's
		// index as a number, a name that is no identifier quoted.
		var sels []cue.Selector
		for _, label := range e.Path() {
			if name, err := strconv.Unquote(label); err == nil {
				sels = append(sels, cue.Str(name))
			} else if i, err := strconv.Atoi(label); err == nil && i >= 0 {
				sels = append(sels, cue.Index(i))
			} else {
				sels = append(sels, cue.Str(label))
			}
		}
		at := v.LookupPath(cue.MakePath(sels...))
		pos := at.Pos()
		if f, ok := at.Source().(*ast.Field); ok && f.Value != nil && f.Value.Pos().IsValid() {
			pos = f.Value.Pos() // the value written, as CUE places an incomplete type
		}
		if pos.IsValid() {
			text += ":\n    " + pos.String()
		}
		b.WriteString(text + "\n")
	}
	return strings.TrimSpace(b.String())
}

// optionalFields refuses an optional field (a?: 1) in src, the CUE data
// file path: the field is left out of the data, so what it writes is
// never checked nor used. A definition, a hidden field or a let, which are
// no data, may hold them; one under a pattern constraint, which applies to
// data, is told that a schema goes in a definition. src has been
// evaluated without error.
func optionalFields(path string, src []byte) error {
	f, err := parser.ParseFile(path, src)
	if err != nil {
		return nil // evaluated already: not reached
	}
	var errs []error
	patterns := 0 // the pattern constraints ([string]: ...) around the node
	isPattern := func(n ast.Node) bool {
		f, ok := n.(*ast.Field)
		if ok {
			_, ok = f.Label.(*ast.ListLit)
		}
		return ok
	}
	ast.Walk(f, func(n ast.Node) bool {
		if isPattern(n) {
			patterns++
		}
		switch n := n.(type) {
		case *ast.LetClause:
			return false
		case *ast.Field:
			name, isIdent, _ := ast.LabelName(n.Label)
			if isIdent && (strings.HasPrefix(name, "#") || strings.HasPrefix(name, "_")) {
				return false
			}
			if n.Constraint == token.OPTION {
				label := name + "?: "
				if l, ok := n.Label.(*ast.BasicLit); ok {
					label = l.Value + "?: "
				} else if name == "" {
					label = "" // a label computed from an expression
				}
				p := n.Label.Pos().Position()
				at := Pos{File: path, Line: p.Line, Col: p.Column}
				hint := ""
				if patterns > 0 {
					hint = " (a schema for the cases goes in a definition: #Case: {...}, tests: [string]: #Case)"
				}
				errs = append(errs, fmt.Errorf("%s: %san optional field is neither checked nor used (it is left out of the data): remove the ?%s", at, label, hint))
				return false
			}
		}
		return true
	}, func(n ast.Node) {
		if isPattern(n) {
			patterns--
		}
	})
	return errors.Join(errs...)
}
