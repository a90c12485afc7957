package dsl

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"

	"github.com/agentc-dev/agentc/schemas"
)

// Schema is the policy schema: the embedded CUE definitions, the catalog of
// middleware kinds, and the builtins' ordering constraints. A Schema is
// immutable and safe for concurrent use; every Load evaluates it in a CUE
// context of its own.
type Schema struct {
	catalog     *Catalog
	sources     map[string][]byte // schema file name -> CUE source
	kindFiles   map[string]string // kind id -> the schema file defining its config
	names       []string
	constraints []*Constraint
}

// CustomKind is a middleware registered from Go with its own CUE config
// schema: Schema is the body of a CUE struct, for example
// `threshold: *0.5 | number & >0 & <=1`.
type CustomKind struct {
	ID         string
	Stages     []string
	Traits     []string
	Repeatable bool
	// DistinctBy lists config fields whose values tell two entries of
	// the kind apart (Kind.DistinctBy).
	DistinctBy []string
	Doc        string
	Schema     string
	// Constraints are the ordering rules the middleware ships; they are
	// checked like the builtins'.
	Constraints []*Constraint
}

var (
	defaultOnce   sync.Once
	defaultSchema *Schema
	defaultErr    error
)

// DefaultSchema returns the schema of the builtins alone.
func DefaultSchema() (*Schema, error) {
	defaultOnce.Do(func() { defaultSchema, defaultErr = NewSchema(nil) })
	return defaultSchema, defaultErr
}

// NewSchema builds the schema of the builtins plus custom kinds. It fails if
// a custom kind reuses a builtin id, names an unknown stage, or has a schema
// that is not valid CUE.
func NewSchema(custom []CustomKind) (*Schema, error) {
	s := &Schema{catalog: &Catalog{}, sources: map[string][]byte{}, kindFiles: map[string]string{}}
	entries, err := fs.ReadDir(schemas.CUE, ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(schemas.CUE, e.Name())
		if err != nil {
			return nil, err
		}
		s.sources["schemas/"+e.Name()] = b
	}
	// The builtins' metadata and constraints are catalog.json's, compiled
	// in (catalog_data.go), which TestCatalogUpToDate derives from the CUE
	// schema: evaluating the schema here would cost every agentc process a
	// cold CUE build, and decoding the JSON a fifth of a millisecond or more.
	// Each schema gets its own copies.
	raw := builtinCatalog
	for id, m := range raw.Builtins {
		k := &Kind{ID: id, Stages: slices.Clone(m.Stages), Traits: slices.Clone(m.Traits), Repeatable: m.Repeatable, DistinctBy: slices.Clone(m.DistinctBy), Doc: m.Doc, Def: defName(id), Builtin: true,
			Config: maps.Clone(raw.Configs[id]), Enums: cloneEnums(raw.Enums[id]), Bounds: maps.Clone(raw.Bounds[id]),
			Durations: maps.Clone(raw.Durations[id])}
		if err := s.catalog.add(k); err != nil {
			return nil, err
		}
		if name := "schemas/" + id + ".cue"; s.sources[name] != nil {
			s.kindFiles[id] = name
		}
	}
	// Sorted by Key, then by the catalog's own name of the constraint
	// (several share a Key: one per stage, or per when), each Key made
	// once rather than at every comparison.
	type sorted struct {
		key, name string
		c         *Constraint
	}
	all := make([]sorted, 0, len(raw.Constraints))
	for name, rc := range raw.Constraints {
		c := &Constraint{ID: rc.ID, Stage: rc.Stage, Outer: rc.Outer, Inner: rc.Inner, Severity: Severity(rc.Severity), Why: rc.Why, Builtin: true}
		if c.Severity == "" {
			c.Severity = Error
		}
		if rc.When != "" {
			c.When = &Expr{Source: rc.When}
		}
		all = append(all, sorted{c.Key(), name, c})
	}
	slices.SortFunc(all, func(a, b sorted) int {
		if r := strings.Compare(a.key, b.key); r != 0 {
			return r
		}
		return strings.Compare(a.name, b.name)
	})
	s.constraints = make([]*Constraint, 0, len(all))
	for _, e := range all {
		s.constraints = append(s.constraints, e.c)
	}

	for i, ck := range custom {
		for _, st := range ck.Stages {
			if st != "chat" && st != "tool" && st != "turn" {
				return nil, fmt.Errorf("middleware %q: unknown stage %q", ck.ID, st)
			}
		}
		if s.catalog.Lookup(ck.ID) != nil {
			return nil, fmt.Errorf("middleware %q is already defined", ck.ID)
		}
		body := strings.TrimSpace(ck.Schema)
		if !strings.HasPrefix(body, "{") {
			body = "{\n" + body + "\n}"
		}
		if _, err := parser.ParseExpr(ck.ID+" schema", body); err != nil {
			return nil, fmt.Errorf("middleware %q: config schema: %w", ck.ID, err)
		}
		def := fmt.Sprintf("#Custom%d", i)
		name := fmt.Sprintf("schemas/custom_%d.cue", i)
		s.sources[name] = []byte(fmt.Sprintf("package schemas\n\n%s: %s\n", def, body))
		s.kindFiles[ck.ID] = name
		if err := s.catalog.add(&Kind{ID: ck.ID, Stages: ck.Stages, Traits: ck.Traits, Repeatable: ck.Repeatable, DistinctBy: ck.DistinctBy, Doc: ck.Doc, Def: def}); err != nil {
			return nil, err
		}
		for _, c := range ck.Constraints {
			if c.ID == "" || c.Outer == "" || c.Inner == "" {
				return nil, fmt.Errorf("middleware %q: a constraint needs id, outer and inner", ck.ID)
			}
			cc := *c
			cc.Builtin, cc.Module = false, ck.ID
			if cc.Severity == "" {
				cc.Severity = Error
			}
			s.constraints = append(s.constraints, &cc)
		}
	}
	for _, c := range s.constraints {
		// A builtin's or a custom middleware's constraint names ids.
		if k := s.catalog.Lookup(c.Outer); k != nil {
			c.OuterKinds = []*Kind{k}
		}
		if k := s.catalog.Lookup(c.Inner); k != nil {
			c.InnerKinds = []*Kind{k}
		}
	}
	if len(custom) > 0 {
		// The embedded schema is checked by the tests; a custom schema is
		// checked here, once.
		v, err := s.build(cuecontext.New())
		if err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		for _, ck := range custom {
			// A schema that is not one struct (a disjunction of structs)
			// leaves the config untyped.
			k := s.catalog.Lookup(ck.ID)
			def := v.LookupPath(cue.ParsePath(k.Def))
			k.Config, _ = configFields(def)
			k.Enums = configEnums(def)
			k.Bounds = configBounds(def)
			k.Durations = configDurations(v, def)
		}
	}
	return s, nil
}

func cloneEnums(m map[string][]string) map[string][]string {
	if m == nil {
		return nil
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// Catalog returns the middleware kinds.
func (s *Schema) Catalog() *Catalog { return s.catalog }

// Constraints returns the ordering constraints the builtins ship.
func (s *Schema) Constraints() []*Constraint { return s.constraints }

// entrySource generates #Entry: the common entry fields plus one conditional
// embed per kind of ids, so that each kind's errors are reported against its
// own closed definition.
func (s *Schema) entrySource(ids []string) []byte {
	var b strings.Builder
	b.WriteString("package schemas\n\n#Entry: {\n\t#EntryBase\n\tuse!: string\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "\tif use == %q {%s}\n", id, s.catalog.Lookup(id).Def)
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// build evaluates the whole schema package in ctx.
func (s *Schema) build(ctx *cue.Context) (cue.Value, error) {
	return s.buildFor(ctx, nil)
}

// buildFor evaluates the schema package in ctx. With uses nil it is the
// whole package; otherwise it holds what checking a policy that uses these
// kinds needs: the common definitions and the config definitions of the
// kinds named (unknown ids are left out), without the builtins' metadata
// and constraints, which the catalog already holds. CUE evaluates every
// definition of a package it builds, so leaving out the kinds a policy does
// not use is most of the cost of a load.
func (s *Schema) buildFor(ctx *cue.Context, uses []string) (cue.Value, error) {
	inst := build.NewContext().NewInstance("schemas", nil)
	var names, ids []string
	if uses == nil {
		for n := range s.sources {
			names = append(names, n)
		}
		ids = s.catalog.IDs()
	} else {
		kindFile := map[string]bool{}
		for _, f := range s.kindFiles {
			kindFile[f] = true
		}
		for n := range s.sources {
			if !kindFile[n] {
				names = append(names, n) // common definitions
			}
		}
		seen := map[string]bool{}
		for _, id := range uses {
			if seen[id] || s.catalog.Lookup(id) == nil {
				continue
			}
			seen[id] = true
			ids = append(ids, id)
			if f, ok := s.kindFiles[id]; ok {
				names = append(names, f)
			}
		}
		sort.Strings(ids)
	}
	sort.Strings(names)
	add := func(name string, src []byte) error {
		var opts []parser.Option
		if uses == nil {
			// A policy is never reported against the schema's comments.
			opts = append(opts, parser.ParseComments)
		}
		f, err := parser.ParseFile(name, src, opts...)
		if err != nil {
			return err
		}
		if uses != nil {
			f.Decls = withoutMetadata(f.Decls)
		}
		return inst.AddSyntax(f)
	}
	for _, n := range names {
		if err := add(n, s.sources[n]); err != nil {
			return cue.Value{}, err
		}
	}
	if err := add("schemas/entry.cue", s.entrySource(ids)); err != nil {
		return cue.Value{}, err
	}
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		return cue.Value{}, err
	}
	return v, nil
}

// withoutMetadata drops the top-level `builtins` and `constraints` fields
// of a schema file, and the comprehensions that generate constraints: the
// builtins' metadata and ordering rules, which a policy is not unified
// with.
func withoutMetadata(decls []ast.Decl) []ast.Decl {
	out := decls[:0:0]
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.Field:
			if id, ok := d.Label.(*ast.Ident); ok && (id.Name == "builtins" || id.Name == "constraints") {
				continue
			}
		case *ast.Comprehension:
			continue
		case *ast.EmbedDecl:
			if _, ok := d.Expr.(*ast.Comprehension); ok {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}
