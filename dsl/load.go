package dsl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"

	"github.com/agentc-dev/agentc/internal/textdist"
)

// Limits that keep a pathological policy from hanging or exhausting memory.
const (
	// MaxFileSize is the largest policy file Load reads.
	MaxFileSize = 4 << 20
	// MaxNesting is the deepest bracket nesting Load accepts.
	MaxNesting = 200
	// MaxChain is the most binary operators and selectors Load accepts
	// in one value.
	MaxChain = 1000
	// DefaultTimeout bounds the evaluation of one policy.
	DefaultTimeout = 10 * time.Second
)

// Options configures Load.
type Options struct {
	// Schema is the policy schema (default: DefaultSchema()).
	Schema *Schema
	// Timeout bounds reading, parsing and evaluation (default
	// DefaultTimeout); it starts before the first file is read. CUE has no
	// evaluation budget: on timeout Load returns a diagnostic, and the
	// evaluation goroutine is abandoned to finish on its own (at most
	// MaxAbandoned at a time; see ErrEvaluationBusy).
	Timeout time.Duration
	// KeepPartial returns the policy decoded so far even when a
	// diagnostic is an error, for checks that are sound on the parts that
	// decoded (an entry whose own value has no error: Entry.WellTyped).
	// Such a policy must not be lowered or run.
	KeepPartial bool
}

// IOError is a problem with the paths given to Load rather than with the
// policy's content: a path that does not exist, a directory with no .cue
// files. The CLI exits 2 on it.
type IOError struct{ Err error }

func (e *IOError) Error() string { return e.Err.Error() }
func (e *IOError) Unwrap() error { return e.Err }

// ResolvePaths turns a directory (one CUE package) or a list of .cue files
// into the policy files to load. Test files (*_test.cue) are not part of a
// policy, and neither are a directory's files whose names begin with "." or
// "_", which the cue tool ignores too: an editor's lock or backup file
// (Emacs's ".#policy.cue", a symlink to nowhere while the buffer has unsaved
// edits) must not break a vet or a reload.
func ResolvePaths(paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, &IOError{errors.New("no policy path given")}
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			if os.IsNotExist(err) {
				return nil, &IOError{fmt.Errorf("%s: no such file or directory%s", p, textdist.PathHint(p))}
			}
			return nil, &IOError{err}
		}
		if st.IsDir() {
			if len(paths) > 1 {
				return nil, &IOError{fmt.Errorf("%s: give one directory, or .cue files", p)}
			}
			matches, err := filepath.Glob(filepath.Join(p, "*.cue"))
			if err != nil {
				return nil, &IOError{err}
			}
			for _, m := range matches {
				if IsPolicyFileName(filepath.Base(m)) {
					files = append(files, m)
				}
			}
			if len(files) == 0 {
				return nil, &IOError{fmt.Errorf("%s: no .cue files in directory", p)}
			}
			continue
		}
		if filepath.Ext(p) != ".cue" {
			return nil, &IOError{fmt.Errorf("%s: not a .cue file", p)}
		}
		files = append(files, p)
	}
	sort.Strings(files)
	return files, nil
}

// IsPolicyFileName reports whether a file of a policy directory named name
// is one of the policy's files: a .cue file that is not a test file
// (*_test.cue) and whose name does not begin with "." or "_".
func IsPolicyFileName(name string) bool {
	return strings.HasSuffix(name, ".cue") && !strings.HasSuffix(name, "_test.cue") &&
		!strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_")
}

// Load reads, checks and decodes a policy. paths is a directory (one CUE
// package) or .cue files of one package. It returns an *IOError for unusable
// paths; every problem with the content is a diagnostic. The policy is nil
// when any diagnostic is an error, unless opts.KeepPartial.
func Load(ctx context.Context, paths []string, opts Options) (*Policy, Diagnostics, error) {
	files, err := ResolvePaths(paths)
	if err != nil {
		return nil, nil, err
	}
	if opts.Schema == nil {
		if opts.Schema, err = DefaultSchema(); err != nil {
			return nil, nil, err
		}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	l := &loader{schema: opts.Schema, files: files, dir: filepath.Dir(files[0])}
	at := Pos{File: files[0], Line: 1, Col: 1}
	var p *Policy
	err = withDeadline(ctx, opts.Timeout, func() {
		defer func() {
			if r := recover(); r != nil {
				p = nil
				l.diags = append(l.diags, Errorf(at, "cue/syntax", "policy evaluation failed: %v", r))
			}
		}()
		parsed, ok := l.parse()
		if !ok {
			return
		}
		p = l.evaluate(parsed)
	})
	switch {
	case errors.Is(err, errDeadline):
		return nil, Diagnostics{Errorf(at, "cue/syntax",
			"policy evaluation did not finish within %s; simplify the policy", opts.Timeout)}, nil
	case errors.Is(err, ErrEvaluationBusy):
		return nil, Diagnostics{Errorf(at, "cue/syntax", "%v", err)}, nil
	case err != nil:
		return nil, nil, err
	}
	diags := l.diags.Sort()
	if diags.HasErrors() && !opts.KeepPartial {
		return nil, diags, nil
	}
	return p, diags, nil
}

type loader struct {
	schema *Schema
	files  []string
	dir    string
	diags  Diagnostics
	user   cue.Value // the user's value alone, for positions
	pos    *positions
	// unified is the user's value unified with #Policy, for the fields a
	// closed definition allows (did-you-mean).
	unified cue.Value
	// schemaFiles are the JSON Schema files the policy names, read.
	schemaFiles []*schemaFile
}

func (l *loader) errorf(pos Pos, rule, format string, args ...any) {
	l.diags = append(l.diags, Errorf(pos, rule, format, args...))
}

func (l *loader) warnf(pos Pos, rule, format string, args ...any) {
	l.diags = append(l.diags, Warnf(pos, rule, format, args...))
}

// parse reads and parses every file, checking size, encoding, nesting and
// package clauses.
func (l *loader) parse() ([]*ast.File, bool) {
	var out []*ast.File
	pkg, pkgFile := "", ""
	for _, name := range l.files {
		at := Pos{File: name, Line: 1, Col: 1}
		src, err := ReadFile(name, MaxFileSize)
		if err != nil {
			var big *TooLargeError
			if errors.As(err, &big) {
				l.errorf(at, "cue/syntax", "%v for a policy file", big)
			} else {
				l.errorf(at, "cue/syntax", "cannot read file: %s", readErrorText(err))
			}
			continue
		}
		if p, ok := checkText(name, src); !ok {
			l.errorf(p, "cue/syntax", "file is not UTF-8 text")
			continue
		}
		if sh := checkShape(name, src); sh.depth > MaxNesting {
			l.errorf(sh.depthAt, "cue/syntax", "nesting deeper than %d levels", MaxNesting)
			continue
		} else if sh.chain > MaxChain {
			l.errorf(sh.chainAt, "cue/syntax", "an expression chains more than %d operators and selectors", MaxChain)
			continue
		}
		if len(bytes.TrimSpace(src)) == 0 {
			l.errorf(at, "cue/syntax", "empty file: a policy file starts with a package clause")
			continue
		}
		f, err := parser.ParseFile(name, src, parser.ParseComments)
		if err != nil {
			// Only the first: later ones are usually its echoes.
			e := cueerrors.Errors(err)[0]
			pos := cuePos(e.Position(), at)
			// An unclosed bracket is reported where its closer is
			// missing, not where the parser gave up.
			if miss, msg, ok := unclosedBracket(name, src); ok && !pos.Before(miss) {
				l.errorf(miss, "cue/syntax", "%s", msg)
				continue
			}
			l.errorf(pos, "cue/syntax", "%s%s", errMsg(e), syntaxHint(src, pos, errMsg(e)))
			continue
		}
		name0 := f.PackageName()
		if name0 == "" {
			l.errorf(at, "cue/syntax", "file has no package clause: add `package <name>` as its first line")
			continue
		}
		if pkg == "" {
			pkg, pkgFile = name0, name
		} else if name0 != pkg {
			l.errorf(packagePos(f, at), "cue/syntax", "package %s differs from package %s in %s: a policy is one package", name0, pkg, pkgFile)
			continue
		}
		out = append(out, f)
	}
	return out, !l.diags.HasErrors()
}

func packagePos(f *ast.File, def Pos) Pos {
	for _, d := range f.Decls {
		if p, ok := d.(*ast.Package); ok && p.Name != nil {
			return cuePos(p.Name.Pos(), def)
		}
	}
	return def
}

// checkText reports whether src is UTF-8 without NUL bytes, and where it is
// not.
func checkText(name string, src []byte) (Pos, bool) {
	line, col := 1, 1
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRune(src[i:])
		if (r == utf8.RuneError && n == 1) || r == 0 {
			return Pos{File: name, Line: line, Col: col}, false
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col += n
		}
		i += n
	}
	return Pos{}, true
}

// textShape is what checkShape measures of a policy text.
type textShape struct {
	depth   int // deepest nesting
	depthAt Pos // where nesting first exceeds MaxNesting
	chain   int // longest chain of operators and selectors in one value
	chainAt Pos // where a chain first exceeds MaxChain
}

// checkShape measures how deeply the text nests and how long its operator
// chains are, outside strings and comments. Nesting counts {, [ and (, and
// the labels of a field chain beyond its first (`a: b: c: 1` nests as deeply
// as `a: {b: {c: 1}}`); a chain counts the binary operators and selectors of
// one value (`a.b.c + d`). CUE's parser and evaluator recurse on all of
// them. It is a guard, not a parser: it only has to be right for well-formed
// text and bounded for the rest.
func checkShape(name string, src []byte) textShape {
	var sh textShape
	depth := 0
	// labels and ops hold, per open bracket (and the file), the labels of
	// the field chain and the operators of the value being read there.
	labels, ops := []int{0}, []int{0}
	line, col := 1, 0
	inStr := byte(0)
	last := byte(0) // the last significant byte outside strings
	here := func() Pos { return Pos{File: name, Line: line, Col: col} }
	deeper := func() {
		depth++
		if depth > sh.depth {
			sh.depth = depth
			if depth == MaxNesting+1 {
				sh.depthAt = here()
			}
		}
	}
	op := func() {
		top := len(ops) - 1
		ops[top]++
		if ops[top] > sh.chain {
			sh.chain = ops[top]
			if sh.chain == MaxChain+1 {
				sh.chainAt = here()
			}
		}
	}
	endValue := func() {
		top := len(labels) - 1
		if labels[top] > 1 {
			depth -= labels[top] - 1
		}
		labels[top], ops[top] = 0, 0
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		col++
		if c == '\n' {
			line, col = line+1, 0
			if inStr == '"' || inStr == '\'' {
				// Only multi-line strings span lines; a lone quote
				// cannot, so resynchronise.
				inStr = 0
			}
			// A line ending in an operator continues its value.
			if inStr == 0 && !strings.ContainsRune("+-*/&|=<>!.", rune(last)) {
				endValue()
			}
			continue
		}
		if inStr != 0 {
			if c == '\\' {
				i++
				col++
			} else if c == inStr {
				inStr = 0
				last = c
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r':
			continue
		case '/':
			if i+1 < len(src) && src[i+1] == '/' {
				for i < len(src) && src[i] != '\n' {
					i++
				}
				i--
				continue
			}
			op()
		case '"', '\'':
			inStr = c
		case ':':
			top := len(labels) - 1
			labels[top]++
			if labels[top] > 1 {
				deeper()
			}
		case ',':
			endValue()
		case '{', '[', '(':
			labels, ops = append(labels, 0), append(ops, 0)
			deeper()
		case '}', ']', ')':
			if len(labels) > 1 {
				endValue()
				labels, ops = labels[:len(labels)-1], ops[:len(ops)-1]
				depth--
			}
		case '+', '-', '*', '&', '|', '=', '<', '>', '.':
			op()
		}
		last = c
	}
	return sh
}

func sizeString(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// evaluate builds the package, unifies it with #Policy, validates it and
// decodes it.
func (l *loader) evaluate(files []*ast.File) *Policy {
	ctx := cuecontext.New()
	inst := build.NewContext().NewInstance(l.dir, nil)
	for _, f := range files {
		if err := inst.AddSyntax(f); err != nil {
			l.addCUEErrors(err, cue.Value{})
			return nil
		}
	}
	// Indexed first: the user's own values can conflict (a list declared
	// in two files), and their errors are placed by it.
	l.pos = indexPositions(files)
	user := ctx.BuildInstance(inst)
	if err := user.Err(); err != nil {
		l.addCUEErrors(err, cue.Value{})
		return nil
	}
	l.user = user
	// Unknown middleware ids are reported here, with a did-you-mean; the
	// closedness errors of such an entry are noise and are dropped below.
	skip, uses := l.checkUses(user)
	l.checkTopLevel(user)
	schemaVal, err := l.schema.buildFor(ctx, uses)
	if err != nil {
		l.errorf(Pos{File: l.files[0], Line: 1, Col: 1}, "cue/syntax", "internal schema error: %v", err)
		return nil
	}
	v := schemaVal.LookupPath(cue.MakePath(cue.Def("#Policy"))).Unify(user)
	l.unified = v
	if err := v.Validate(cue.Concrete(true)); err != nil {
		l.addCUEErrors(err, user, skip...)
		l.checkEntryFields(ctx, schemaVal, user, skip)
	}
	l.checkOpenValues(user, v)
	// Decode even after schema errors: references and stages are
	// checked on what is there, so one round reports them all.
	p := &Policy{Package: files[0].PackageName(), Dir: l.dir, Files: l.files, Value: v, ps: l.pos}
	l.decode(p, v)
	return p
}

// topLevel lists the fields of #Policy.
var topLevel = map[string]bool{"models": true, "tools": true, "chains": true, "admit": true, "constraints": true, "stores": true, "settings": true, "keys": true, "mcp": true, "invariants": true,
	"grounding": true, "state": true}

// checkTopLevel reports regular top-level fields that #Policy does not
// declare (CUE does not close the package's own struct). Definitions and
// hidden fields are the user's helpers and are allowed.
func (l *loader) checkTopLevel(user cue.Value) {
	it, err := user.Fields()
	if err != nil {
		return
	}
	var names []string
	for k := range topLevel {
		names = append(names, k)
	}
	sort.Strings(names)
	for it.Next() {
		name := it.Selector().Unquoted()
		if topLevel[name] {
			continue
		}
		pos, _ := l.pos.lookup([]string{name}, true)
		if !pos.IsValid() {
			pos = Pos{File: l.files[0], Line: 1, Col: 1}
		}
		l.errorf(pos, "schema/unknown-field", "unknown field %q%s", name, suggestName(name, names))
	}
}

// checkEntryFields reports the unknown fields of the chain entries that
// the schema's validation left unreported: CUE does not report a field an
// entry's closed struct refuses once another of its fields is in error
// (tools: "refund" beside mesage: "x"), and one round of vet should show
// both. A field is unknown when the entry's kind does not allow it; one
// the schema allows only under a setting of another field (a classifier's
// model) is left to the schema's report. Entries in skip (an unknown use)
// are not checked.
func (l *loader) checkEntryFields(ctx *cue.Context, schemaVal, user cue.Value, skip []string) {
	reported := map[Pos]bool{}
	for _, d := range l.diags {
		if d.Rule == "schema/unknown-field" {
			reported[d.Pos] = true
		}
	}
	kinds := map[string]cue.Value{}
	entry := schemaVal.LookupPath(cue.MakePath(cue.Def("#Entry")))
	for _, stage := range Stages {
		it, err := user.LookupPath(fieldPath("chains", stage)).List()
		if err != nil {
			continue
		}
		for i := 0; it.Next(); i++ {
			path := []string{"chains", stage, strconv.Itoa(i)}
			if slices.Contains(skip, strings.Join(path, ".")) {
				continue
			}
			ev := it.Value()
			use, err := ev.LookupPath(fieldPath("use")).String()
			if err != nil || l.schema.catalog.Lookup(use) == nil {
				continue
			}
			kind, ok := kinds[use]
			if !ok {
				kind = entry.Unify(ctx.CompileString(fmt.Sprintf("{use: %q}", use)))
				kinds[use] = kind
			}
			fields, err := ev.Fields()
			if err != nil {
				continue
			}
			for fields.Next() {
				sel := fields.Selector()
				if !sel.IsString() {
					continue
				}
				name := sel.Unquoted()
				if kind.Allows(cue.Str(name)) {
					continue
				}
				if _, cond := conditionalFields()[name]; cond {
					continue
				}
				pos, ok := l.pos.lookup(append(slices.Clone(path), name), true)
				if !ok || reported[pos] {
					continue
				}
				reported[pos] = true
				l.errorf(pos, "schema/unknown-field", "unknown field %q%s%s", name, nonASCIINote(name), suggestField(name, fieldNames(kind)))
			}
		}
	}
}

// checkUses reports every chain entry whose use names no known kind and
// returns the paths of those entries, and the kinds the entries use.
func (l *loader) checkUses(user cue.Value) (skip, uses []string) {
	uses = []string{}
	for _, stage := range Stages {
		list := user.LookupPath(fieldPath("chains", stage))
		if !list.Exists() {
			continue
		}
		it, err := list.List()
		if err != nil {
			continue
		}
		for i := 0; it.Next(); i++ {
			u := it.Value().LookupPath(fieldPath("use"))
			id, err := u.String()
			if err != nil {
				continue
			}
			if l.schema.catalog.Lookup(id) != nil {
				uses = append(uses, id)
				continue
			}
			msg := fmt.Sprintf("unknown middleware %q", id)
			if s := l.schema.catalog.Suggest(id); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			l.errorf(valuePos(u), "schema/unknown-middleware", "%s", msg)
			skip = append(skip, fmt.Sprintf("chains.%s.%d", stage, i))
		}
	}
	return skip, uses
}

// checkOpenValues reports a value the policy leaves open (a disjunction
// without a default of its own, a bound, a type) that the schema's default
// closes: `max_attempts: 3 | 4` or `max_attempts: >2` would silently take the
// default 3, and `trail: "attempts" | "logical"` the default "logical", a
// choice the author did not make. A value that stays open after unification
// is reported by the schema pass ("give a concrete value").
func (l *loader) checkOpenValues(user, unified cue.Value) {
	err := user.Validate(cue.Concrete(true))
	for _, e := range cueerrors.Errors(err) {
		if !strings.HasPrefix(errMsg(e), "incomplete value") {
			continue
		}
		path := e.Path()
		sel := selPath(path)
		uv, v := user.LookupPath(sel), unified.LookupPath(sel)
		if !uv.Exists() || !v.Exists() || v.Validate(cue.Concrete(true)) != nil {
			continue
		}
		def, _ := v.Default()
		pos := posOf(uv)
		if !pos.IsValid() || !l.isUserFile(pos.File) {
			pos = l.placeError(e, path, user)
		}
		l.errorf(pos, "schema/invalid-value", "%s: %s is not one value, and the schema's default %s would be taken for it: write the value you mean", fieldName(path), fmt.Sprint(uv), fmt.Sprint(def))
	}
}
