package dsl

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"

	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Kind describes a middleware kind (a builtin or a registered custom
// middleware) to the loader and the compiler.
type Kind struct {
	// ID is what `use` names.
	ID string
	// Stages the kind may be used in ("chat", "tool", "turn").
	Stages []string
	// Traits of its behaviour ("reinvokes", "short_circuits", "records",
	// "counts_tokens", "rewrites_messages", "guards", "caches",
	// "side_effect_sensitive").
	Traits []string
	// Repeatable kinds may appear more than once in a chain.
	Repeatable bool
	// DistinctBy lists config fields that tell apart two entries of a kind
	// that is not repeatable: entries of one chain that differ in any of
	// them keep separate state and are not duplicates (order/duplicate).
	DistinctBy []string
	// Doc is a one-line description.
	Doc string
	// Def is the CUE expression of the config struct: a definition of the
	// schemas package (builtins) or a struct literal (custom middlewares).
	Def string
	// Builtin is true for the standard middlewares.
	Builtin bool
	// Config lists the fields of the config struct with the kind of value
	// each holds: "string", "int", "float", "number" (int or float),
	// "bool", "list", "struct", or "any" (a mix of these, or null). A
	// constraint's `when` is type-checked against it. It is nil when the
	// config is not one struct (a custom schema that is a disjunction):
	// its fields are then unknown.
	Config map[string]string
	// Enums lists, for each config field that holds one of a fixed set of
	// strings (a level, a mode), those strings, sorted. A constraint's
	// `when` comparing the field with another string is reported.
	Enums map[string][]string
	// Bounds lists, for each numeric config field the schema bounds (a
	// retry's max_attempts: 1 to 10), its bounds. A constraint's `when`
	// comparing the field with a number it can never reach is reported.
	// A field of a nested struct (a retry's breaker.failures) is listed
	// by its dotted path.
	Bounds map[string]Bound
	// Durations lists the config fields that hold a duration (#Duration,
	// #PositiveDuration: true), nested ones by their dotted path as in
	// Bounds: a value longer than a time.Duration holds is refused at
	// the field.
	Durations map[string]bool
}

// Bound is the range of a numeric config field (plan.Bound: the plan's
// loader holds a plan's configs to the same bounds).
type Bound = plan.Bound

// Supports reports whether k may be used in stage.
func (k *Kind) Supports(stage string) bool {
	for _, s := range k.Stages {
		if s == stage {
			return true
		}
	}
	return false
}

// Has reports whether k has the trait.
func (k *Kind) Has(trait string) bool {
	for _, t := range k.Traits {
		if t == trait {
			return true
		}
	}
	return false
}

// Catalog holds the kinds a policy may use, by id.
type Catalog struct {
	kinds map[string]*Kind
	ids   []string
}

// catalogFile is the form of schemas/catalog.json: the `builtins` and
// `constraints` fields of the CUE schema, evaluated.
type catalogFile struct {
	Builtins    map[string]builtinMeta   `json:"builtins"`
	Constraints map[string]rawConstraint `json:"constraints"`
	// Configs holds each builtin's config fields (Kind.Config), derived
	// from its definition.
	Configs map[string]map[string]string `json:"configs"`
	// Enums holds each builtin's fields of fixed string values
	// (Kind.Enums), derived from its definition.
	Enums map[string]map[string][]string `json:"enums"`
	// Bounds holds each builtin's bounded numeric fields (Kind.Bounds),
	// derived from its definition.
	Bounds map[string]map[string]Bound `json:"bounds"`
	// Durations holds each builtin's duration fields (Kind.Durations),
	// derived from its definition.
	Durations map[string]map[string]bool `json:"durations"`
	// DurationWords holds, for each duration field that also takes words
	// (a meter's window: "month"), those words (configDurationWords).
	DurationWords map[string]map[string][]string `json:"duration_words"`
	// Fields holds each builtin's config fields, nested ones by their
	// dotted path, with their kinds (configFieldKinds): the plan's loader
	// holds a plan's configs to them.
	Fields map[string]map[string]string `json:"fields"`
}

type builtinMeta struct {
	Stages     []string `json:"stages"`
	Traits     []string `json:"traits"`
	Repeatable bool     `json:"repeatable"`
	DistinctBy []string `json:"distinct_by,omitempty"`
	Doc        string   `json:"doc"`
}

type rawConstraint struct {
	ID       string `json:"id"`
	Stage    string `json:"stage,omitempty"`
	Outer    string `json:"outer"`
	Inner    string `json:"inner"`
	When     string `json:"when,omitempty"`
	Severity string `json:"severity"`
	Why      string `json:"why"`
}

// Lookup returns the kind with id, or nil.
func (c *Catalog) Lookup(id string) *Kind { return c.kinds[id] }

// IDs returns every id, sorted.
func (c *Catalog) IDs() []string { return c.ids }

func (c *Catalog) add(k *Kind) error {
	if c.kinds == nil {
		c.kinds = map[string]*Kind{}
	}
	if _, dup := c.kinds[k.ID]; dup {
		return fmt.Errorf("middleware %q is defined twice", k.ID)
	}
	c.kinds[k.ID] = k
	c.ids = append(c.ids, k.ID)
	sort.Strings(c.ids)
	return nil
}

// Suggest returns the known id closest to id, or "" when none is close.
func (c *Catalog) Suggest(id string) string {
	best, bestD := "", 1<<30
	for _, k := range c.ids {
		d := textdist.Distance(strings.ToLower(id), k)
		if d < bestD {
			best, bestD = k, d
		}
	}
	limit := len(id)/3 + 1
	if limit > 3 {
		limit = 3
	}
	if bestD <= limit {
		return best
	}
	// A different word order or separator ("ratelimit", "rate-limit").
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(s))
	}
	for _, k := range c.ids {
		if norm(k) == norm(id) {
			return k
		}
	}
	return ""
}

// defName is the schemas definition of a builtin id: "output_coerce" ->
// "#OutputCoerce".
func defName(id string) string {
	var b strings.Builder
	b.WriteByte('#')
	for _, part := range strings.Split(id, "_") {
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// configFields returns the fields of a config definition with the kind of
// value each holds (Kind.Config).
func configFields(def cue.Value) (map[string]string, error) {
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for it.Next() {
		out[it.Selector().Unquoted()] = valueKind(it.Value().IncompleteKind())
	}
	return out, nil
}

// configEnums returns the fields of a config definition whose value is one
// of a fixed set of strings ("info" | "debug"), with those strings, sorted
// (Kind.Enums); nil when there is none.
func configEnums(def cue.Value) map[string][]string {
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var out map[string][]string
	for it.Next() {
		v := it.Value()
		if v.IncompleteKind() != cue.StringKind {
			continue
		}
		op, args := v.Expr()
		if op != cue.OrOp {
			continue
		}
		var vals []string
		for _, a := range args {
			s, err := a.String()
			if err != nil || !a.IsConcrete() {
				vals = nil
				break
			}
			vals = append(vals, s)
		}
		if len(vals) == 0 {
			continue
		}
		sort.Strings(vals)
		if out == nil {
			out = map[string][]string{}
		}
		out[it.Selector().Unquoted()] = slices.Compact(vals)
	}
	return out
}

// configBounds returns the numeric fields of a config definition whose
// schema bounds them, those of its nested structs by their dotted path
// (breaker.failures), with their bounds (Kind.Bounds); nil when there is
// none.
func configBounds(def cue.Value) map[string]Bound {
	var out map[string]Bound
	eachConfigField(def, "", 0, func(path string, v cue.Value) {
		if k := v.IncompleteKind(); k != cue.IntKind && k != cue.FloatKind && k != cue.NumberKind {
			return
		}
		b := valueBound(v, 0)
		if !b.HasMin && !b.HasMax {
			return
		}
		if out == nil {
			out = map[string]Bound{}
		}
		out[path] = b
	})
	return out
}

// configDurations returns the fields of a config definition, nested ones
// by their dotted path, that hold a duration (a disjunct is #Duration),
// true for those that must be above zero (#PositiveDuration): Kind.Durations;
// nil when there is none. schema is the schemas package's value, which
// defines both.
func configDurations(schema, def cue.Value) map[string]bool {
	duration := schema.LookupPath(cue.ParsePath("#Duration"))
	positive := schema.LookupPath(cue.ParsePath("#PositiveDuration"))
	if !duration.Exists() || !positive.Exists() {
		return nil
	}
	var out map[string]bool
	eachConfigField(def, "", 0, func(path string, v cue.Value) {
		if v.IncompleteKind() != cue.StringKind {
			return
		}
		op, args := v.Expr()
		if op != cue.OrOp {
			args = []cue.Value{v}
		}
		for _, a := range args {
			if a.IsConcrete() || duration.Subsume(a) != nil {
				continue
			}
			if out == nil {
				out = map[string]bool{}
			}
			out[path] = out[path] || positive.Subsume(a) == nil
		}
	})
	return out
}

// configFieldKinds returns the fields of a config definition, those of
// its nested structs by their dotted path (breaker.failures), with the
// kind of value each holds, as Kind.Config does; a struct that takes any
// key (a map keyed by names, such as tracing's attributes) is "map". The
// elements of a list are listed under the list's path and "[]"
// (tool_policy's arg_patterns.[].arg), the values of a map under its path
// and "*" (tracing's attributes.*). A
// field that a struct declares only for one value of another field (a
// summarizing compaction's model, a chat classifier's) is listed too; one
// whose kind differs between such values is "any".
func configFieldKinds(def cue.Value) map[string]string {
	out := map[string]string{}
	var walk func(v cue.Value, prefix string, depth int)
	var field func(path string, v cue.Value, depth int)
	walk = func(v cue.Value, prefix string, depth int) {
		if depth > 8 {
			return
		}
		for _, variant := range structVariants(v) {
			it, err := variant.Fields(cue.Optional(true))
			if err != nil {
				continue
			}
			for it.Next() {
				path, fv := prefix+it.Selector().Unquoted(), it.Value()
				field(path, fv, depth)
			}
		}
	}
	// field records the kind of the value v at path and of what it holds:
	// a struct's fields, a list's elements (path.[]) and a map's values
	// (path.*).
	field = func(path string, v cue.Value, depth int) {
		kind := valueKind(v.IncompleteKind())
		if kind == "struct" && v.Allows(cue.AnyString) {
			kind = "map"
		}
		if old, seen := out[path]; seen && old != kind {
			kind = "any"
		}
		out[path] = kind
		switch kind {
		case "struct":
			walk(v, path+".", depth+1)
		case "list":
			if elem := v.LookupPath(cue.MakePath(cue.AnyIndex)); elem.Exists() && depth < 8 {
				field(path+"."+plan.ElementSegment, elem, depth+1)
			}
		case "map":
			if val := v.LookupPath(cue.MakePath(cue.AnyString)); val.Exists() && depth < 8 {
				field(path+"."+plan.ValueSegment, val, depth+1)
			}
		}
	}
	walk(def, "", 0)
	return out
}

// structVariants returns the struct v and, for each of its fields that
// holds one of a fixed set of strings (strategy: "keep_recent" |
// "summarize"), v with the field set to each of them, so that the fields
// a comprehension declares under one (if strategy == "summarize") appear.
func structVariants(v cue.Value) []cue.Value {
	out := []cue.Value{v}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return out
	}
	for it.Next() {
		fv := it.Value()
		if fv.IncompleteKind() != cue.StringKind {
			continue
		}
		op, args := fv.Expr()
		if op != cue.OrOp {
			continue
		}
		for _, a := range args {
			if s, err := a.String(); err == nil && a.IsConcrete() {
				out = append(out, v.FillPath(cue.MakePath(it.Selector()), s))
			}
		}
	}
	return out
}

// configDurationWords returns the duration fields of a config definition
// (configDurations) that take words besides durations (a meter's window:
// #Duration | "month"), with those words, sorted; nil when there is none.
func configDurationWords(schema, def cue.Value) map[string][]string {
	duration := schema.LookupPath(cue.ParsePath("#Duration"))
	durations := configDurations(schema, def)
	var out map[string][]string
	eachConfigField(def, "", 0, func(path string, v cue.Value) {
		if _, ok := durations[path]; !ok {
			return
		}
		op, args := v.Expr()
		if op != cue.OrOp {
			return
		}
		for _, a := range args {
			s, err := a.String()
			if err != nil || !a.IsConcrete() || duration.Unify(a).Validate() == nil {
				continue
			}
			if out == nil {
				out = map[string][]string{}
			}
			out[path] = append(out[path], s)
		}
		slices.Sort(out[path])
	})
	return out
}

// eachConfigField calls visit with the dotted path and value of each field
// of the struct v, optional ones included, and of the structs nested in
// it (not those of lists or of maps keyed by names).
func eachConfigField(v cue.Value, prefix string, depth int, visit func(path string, v cue.Value)) {
	if depth > 8 {
		return
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return
	}
	for it.Next() {
		path := prefix + it.Selector().Unquoted()
		fv := it.Value()
		visit(path, fv)
		if fv.IncompleteKind() == cue.StructKind {
			eachConfigField(fv, path+".", depth+1, visit)
		}
	}
}

// valueBound returns the bounds of the numbers v allows: those of the
// constraints of a conjunction (>=1 & <=10) together, those of a
// disjunction's values (its default among them) the widest of each side.
func valueBound(v cue.Value, depth int) Bound {
	if depth > 8 {
		return Bound{}
	}
	if v.IsConcrete() {
		if n, err := v.Float64(); err == nil {
			return Bound{Min: n, Max: n, HasMin: true, HasMax: true}
		}
		return Bound{}
	}
	op, args := v.Expr()
	if d, ok := v.Default(); ok && op != cue.OrOp {
		// *3 | int & >=1 & <=10 reads as its default beside the rest.
		op, args = cue.OrOp, append([]cue.Value{d}, args...)
	}
	switch op {
	case cue.OrOp:
		var out Bound
		for i, a := range args {
			b := valueBound(a, depth+1)
			if i == 0 {
				out = b
				continue
			}
			out.Widen(b)
		}
		return out
	case cue.AndOp:
		var out Bound
		for _, a := range args {
			b := valueBound(a, depth+1)
			if b.HasMin && (!out.HasMin || b.Min > out.Min || b.Min == out.Min && b.MinOpen) {
				out.HasMin, out.Min, out.MinOpen = true, b.Min, b.MinOpen
			}
			if b.HasMax && (!out.HasMax || b.Max < out.Max || b.Max == out.Max && b.MaxOpen) {
				out.HasMax, out.Max, out.MaxOpen = true, b.Max, b.MaxOpen
			}
		}
		return out
	case cue.GreaterThanOp, cue.GreaterThanEqualOp, cue.LessThanOp, cue.LessThanEqualOp:
		if len(args) != 1 {
			return Bound{}
		}
		n, err := args[0].Float64()
		if err != nil {
			return Bound{}
		}
		switch op {
		case cue.GreaterThanOp, cue.GreaterThanEqualOp:
			return Bound{Min: n, HasMin: true, MinOpen: op == cue.GreaterThanOp}
		}
		return Bound{Max: n, HasMax: true, MaxOpen: op == cue.LessThanOp}
	case cue.NoOp:
		if len(args) == 1 {
			return valueBound(args[0], depth+1)
		}
	}
	return Bound{}
}

// valueKind names the kind of value a field holds, as Kind.Config does.
func valueKind(k cue.Kind) string {
	switch k {
	case cue.StringKind:
		return "string"
	case cue.IntKind:
		return "int"
	case cue.FloatKind:
		return "float"
	case cue.NumberKind:
		return "number"
	case cue.BoolKind:
		return "bool"
	case cue.ListKind:
		return "list"
	case cue.StructKind:
		return "struct"
	}
	return "any"
}
