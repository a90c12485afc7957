package dsl

import (
	"bytes"
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
// ErrNotRegular, a *TooLargeError, or the file system's error. A leading
// UTF-8 byte order mark is left out of what it returns.
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
	// A byte order mark (as Windows editors save UTF-8) is no part of the
	// text: JSON's readers refuse it, and CUE skips it.
	return bytes.TrimPrefix(b, []byte("\uFEFF")), nil
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
// Errors name the file, and the position when there is one. When the only
// problems are optional fields (each its own error, joined), the data is
// returned with them, without those fields, so that a caller can report
// the file's other problems in the same round; otherwise the data is nil.
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
		optional := optionalFields(path, src, v)
		if out, err = v.MarshalJSON(); err != nil {
			out, evalErr = nil, fmt.Errorf("%s: %v", path, err)
			return
		}
		evalErr = optional
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
// file path, and v, its value: the field is left out of the data, so what
// it writes is never checked nor used. Written outside a definition, a
// hidden field or a let, one is refused whatever it holds; one under a
// pattern constraint, which applies to data, is told that a schema goes
// in a definition. Those, which are no data, may hold optional fields
// that are a schema, but one that reaches the data (_base: {audit?: []},
// want: _base) is refused as well when it holds data (see
// optionalInData). src has been evaluated without error.
func optionalFields(path string, src []byte, v cue.Value) error {
	f, err := parser.ParseFile(path, src)
	if err != nil {
		return nil // evaluated already: not reached
	}
	var errs []error
	told := map[Pos]bool{} // the fields refused as written
	var helpers [][2]int   // the byte ranges of definitions, hidden fields, lets and patterns
	helper := func(n ast.Node) {
		helpers = append(helpers, [2]int{n.Pos().Offset(), n.End().Offset()})
	}
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
			helper(n)
		}
		switch n := n.(type) {
		case *ast.LetClause:
			helper(n)
			return false
		case *ast.Field:
			name, isIdent, _ := ast.LabelName(n.Label)
			if isIdent && (strings.HasPrefix(name, "#") || strings.HasPrefix(name, "_")) {
				helper(n)
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
				errs = append(errs, fmt.Errorf("%s: %s%s%s", at, label, optionalText, hint))
				told[at] = true
				return false
			}
		}
		return true
	}, func(n ast.Node) {
		if isPattern(n) {
			patterns--
		}
	})
	// Where a value is used is the first of its places outside the
	// helpers: the data the file writes (tests: x: want: #W), rather
	// than the definition or the pattern it is unified with; none when
	// each is in a helper (_s: {x: [{a?: 1}]}, want: _s at want.x[0]).
	used := func(v cue.Value) token.Pos {
		places := []token.Pos{v.Pos()}
		if _, parts := v.Expr(); len(parts) > 1 {
			for _, p := range parts {
				places = append(places, p.Pos())
			}
		}
	next:
		for _, p := range places {
			if !p.IsValid() {
				continue
			}
			for _, r := range helpers {
				if r[0] <= p.Offset() && p.Offset() < r[1] {
					continue next
				}
			}
			return p
		}
		return token.NoPos
	}
	errs = append(errs, optionalInData(path, v, told, used)...)
	return errors.Join(errs...)
}

// optionalText is the problem of an optional field in a data file.
const optionalText = "an optional field is neither checked nor used (it is left out of the data): remove the ?"

// optionalInData walks v, the data of the CUE file path, as it is
// written out (the regular fields of its structs, the elements of its
// lists) and refuses, each once, at its place and with the place where it
// is used:
//   - an optional field that holds data (isData): a helper's, a let's or a
//     definition's (#W: {audit?: []}, want: #W), left out of the data as
//     one written in place is. One that holds a schema (want?: {...},
//     n?: int, d?: *5 | int) is not, nor is what it holds walked;
//   - a pattern constraint naming one field (["audit"]: []) that holds
//     data when the struct has no such field: it applies to none.
//
// A field in told, refused already as written, is left out; used gives
// the place where a value is used, if the file writes one, else the
// place of the nearest value around it that it writes is given.
func optionalInData(path string, v cue.Value, told map[Pos]bool, used func(cue.Value) token.Pos) []error {
	var errs []error
	at := func(p token.Pos) Pos {
		q := p.Position()
		return Pos{File: path, Line: q.Line, Col: q.Column}
	}
	// The values around the one walked, innermost first: where a field
	// is used is looked up only when one is refused.
	type around struct {
		v  cue.Value
		up *around
	}
	refuse := func(field cue.Value, label, text string, in *around) {
		place := token.NoPos
		for a := in; a != nil && !place.IsValid(); a = a.up {
			place = used(a.v)
		}
		pos := at(field.Pos())
		if told[pos] {
			return
		}
		if pos.IsValid() {
			told[pos] = true
		} else {
			pos = at(place)
		}
		where := in.v.Path().String()
		if where == "" {
			where = "the top level"
		}
		errs = append(errs, fmt.Errorf("%s: %s: %s (used at %s, %s)", pos, label, text, where, at(place)))
	}
	var walk func(in *around, depth int)
	walk = func(in *around, depth int) {
		if depth > MaxNesting {
			return // checked before evaluation: not reached
		}
		v := in.v
		switch v.Kind() {
		case cue.StructKind:
			it, err := v.Fields(cue.Optional(true), cue.Patterns(true))
			if err != nil {
				return
			}
			for it.Next() {
				sel, fv := it.Selector(), it.Value()
				switch {
				case it.IsOptional():
					if isData(fv, 0) {
						refuse(fv, sel.String(), optionalText, in)
					}
				case sel.ConstraintType() == cue.PatternConstraint:
					// A pattern of one concrete string names one field;
					// any other ([string], =~"^a", "a" | "b") is a schema.
					name, err := sel.Pattern().String()
					if err != nil || !sel.Pattern().IsConcrete() || v.LookupPath(cue.MakePath(cue.Str(name))).Exists() || !isData(fv, 0) {
						continue
					}
					refuse(fv, sel.String(), "a pattern constraint naming one field is neither checked nor used (it is left out of the data): remove the [ ]", in)
				case !sel.IsConstraint():
					walk(&around{fv, in}, depth+1)
				}
			}
		case cue.ListKind:
			it, err := v.List()
			if err != nil {
				return
			}
			for it.Next() {
				walk(&around{it.Value(), in}, depth+1)
			}
		}
	}
	walk(&around{v: v}, 0)
	return errs
}

// isData reports whether v, the value of an optional field or a pattern,
// is data rather than a schema: a concrete value with no default
// (*5 | int), no error (_|_), a struct with no pattern constraint, no
// ellipsis and no required field whose fields, optional ones included,
// are data, a closed list whose elements are. A value deeper than
// MaxNesting (a recursive definition, #T: {next?: #T}) is a schema.
func isData(v cue.Value, depth int) bool {
	if depth > MaxNesting || v.Err() != nil || !v.IsConcrete() {
		return false
	}
	if _, ok := v.Default(); ok {
		return false
	}
	switch v.Kind() {
	case cue.StructKind:
		if v.LookupPath(cue.MakePath(cue.AnyString)).Exists() {
			return false
		}
		it, err := v.Fields(cue.Optional(true), cue.Patterns(true))
		if err != nil {
			return false
		}
		for it.Next() {
			if ct := it.Selector().ConstraintType(); ct == cue.PatternConstraint || ct == cue.RequiredConstraint || !isData(it.Value(), depth+1) {
				return false
			}
		}
	case cue.ListKind:
		if v.LookupPath(cue.MakePath(cue.AnyIndex)).Exists() {
			return false
		}
		it, err := v.List()
		if err != nil {
			return false
		}
		for it.Next() {
			if !isData(it.Value(), depth+1) {
				return false
			}
		}
	}
	return true
}
