package vet

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// A constraint's `when` is evaluated over `outer` and `inner` as untyped
// maps (constraintEnv), so that a pair whose config lacks a key is checked
// rather than skipped. Before that, it is type-checked with `outer` and
// `inner` typed from the config fields of the kinds they designate
// (dsl.Kind.Config), which is where a misspelt field (outer.trial) is
// caught.

// configTypeName is the CEL type name of a kind's config.
func configTypeName(k *dsl.Kind) string { return "agentc.config." + k.ID }

// configProvider serves the config types of the kinds an environment
// declares, and the standard registry for everything else.
type configProvider struct {
	*types.Registry
	objects map[string]*configObject
}

type configObject struct {
	typ    *types.Type
	fields map[string]*types.FieldType
	names  []string // sorted
}

func newConfigObject(k *dsl.Kind) *configObject {
	o := &configObject{
		typ:    types.NewObjectType(configTypeName(k)),
		fields: map[string]*types.FieldType{},
	}
	for name, kind := range k.Config {
		o.fields[name] = &types.FieldType{Type: celKind(kind)}
		o.names = append(o.names, name)
	}
	slices.Sort(o.names)
	return o
}

// celKind maps a dsl.Kind.Config value kind to a CEL type. A CUE number is
// an int or a float, so it is dyn.
func celKind(kind string) *types.Type {
	switch kind {
	case "string":
		return types.StringType
	case "int":
		return types.IntType
	case "float":
		return types.DoubleType
	case "bool":
		return types.BoolType
	case "list":
		return types.NewListType(types.DynType)
	case "struct":
		return types.NewMapType(types.StringType, types.DynType)
	}
	return types.DynType
}

// FindIdent implements types.Provider.
func (p *configProvider) FindIdent(name string) (ref.Val, bool) {
	if o, ok := p.objects[name]; ok {
		return o.typ, true
	}
	return p.Registry.FindIdent(name)
}

// FindStructType implements types.Provider.
func (p *configProvider) FindStructType(name string) (*types.Type, bool) {
	if o, ok := p.objects[name]; ok {
		return types.NewTypeTypeWithParam(o.typ), true
	}
	return p.Registry.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *configProvider) FindStructFieldNames(name string) ([]string, bool) {
	if o, ok := p.objects[name]; ok {
		return slices.Clone(o.names), true
	}
	return p.Registry.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (p *configProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if o, ok := p.objects[name]; ok {
		f, ok := o.fields[field]
		return f, ok
	}
	return p.Registry.FindStructFieldType(name, field)
}

// NewValue implements types.Provider: a config cannot be constructed.
func (p *configProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.objects[name]; ok {
		return types.NewErr("cannot construct %s", name)
	}
	return p.Registry.NewValue(name, fields)
}

// typedEnvKey selects the config types of outer and inner (nil: untyped).
type typedEnvKey struct{ outer, inner *dsl.Kind }

// typedEnvs caches the typed environments by pair of kinds; kinds live as
// long as their schema.
var typedEnvs sync.Map // typedEnvKey -> *typedEnv

type typedEnv struct {
	env  *cel.Env
	prov *configProvider
	err  error
}

// typedConstraintEnv returns the environment with outer and inner typed
// from the configs of the two kinds.
func typedConstraintEnv(key typedEnvKey) (*typedEnv, error) {
	if t, ok := typedEnvs.Load(key); ok {
		return t.(*typedEnv), t.(*typedEnv).err
	}
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, err
	}
	prov := &configProvider{Registry: reg, objects: map[string]*configObject{}}
	opts := []cel.EnvOption{
		cel.CustomTypeProvider(prov),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserRecursionLimit(predicate.MaxNestingDepth),
		cel.ParserExpressionSizeLimit(predicate.MaxSourceBytes),
		cel.ExpressionNodeLimit(maxExprNodes),
	}
	for _, v := range []struct {
		name string
		kind *dsl.Kind
	}{{"outer", key.outer}, {"inner", key.inner}} {
		if v.kind == nil {
			opts = append(opts, cel.Variable(v.name, cel.MapType(cel.StringType, cel.DynType)))
			continue
		}
		o := newConfigObject(v.kind)
		prov.objects[configTypeName(v.kind)] = o
		opts = append(opts, cel.Variable(v.name, o.typ))
	}
	t := &typedEnv{prov: prov}
	t.env, t.err = cel.NewEnv(opts...)
	actual, _ := typedEnvs.LoadOrStore(key, t)
	return actual.(*typedEnv), actual.(*typedEnv).err
}

// typeCheckWhen type-checks a `when` that compiles untyped against the
// config types of the kinds its outer and inner designate. The names may
// designate several kinds (an entry named after another builtin's id): the
// condition is accepted when it checks for one pair of them. It returns
// the problem of the first pair, with the closest field name of a
// misspelt config field.
func typeCheckWhen(c *dsl.Constraint) *celIssue {
	outers, inners := kindsOrUntyped(c.OuterKinds), kindsOrUntyped(c.InnerKinds)
	var first *celIssue
	for _, o := range outers {
		for _, i := range inners {
			if o == nil && i == nil {
				return nil // nothing is typed: the untyped check stands
			}
			t, err := typedConstraintEnv(typedEnvKey{o, i})
			if err != nil {
				return &celIssue{predicate.RuleType, 0, err.Error()}
			}
			_, iss := t.env.Compile(c.When.Source)
			if iss.Err() == nil {
				return nil
			}
			errs := slices.DeleteFunc(slices.Clone(iss.Errors()), mapIdiom)
			if len(errs) == 0 {
				return nil // map idioms only: the untyped check stands
			}
			if first == nil {
				first = errorIssue(predicate.RuleType, c.When.Source, errs[0])
				first.message += t.suggestField(c.When.Source, first, map[string]*dsl.Kind{"outer": o, "inner": i})
			}
		}
	}
	return first
}

// mapIdiom reports whether e is a map operation applied to a config object
// ('mode' in inner, inner['mode'], size(inner)): evaluation sees the configs
// as maps, where these are ordinary, so the typed check does not refuse
// them.
func mapIdiom(e *common.Error) bool {
	for _, op := range []string{"'@in'", "'_[_]'", "'size'", "'_[?_]'"} {
		if strings.HasPrefix(e.Message, "found no matching overload for "+op+" applied to ") && strings.Contains(e.Message, "agentc.config.") {
			return true
		}
	}
	return false
}

// kindsOrUntyped returns the kinds a name designates, nil standing for an
// untyped config: a name that designates nothing known, or a kind whose
// config fields are unknown.
func kindsOrUntyped(ks []*dsl.Kind) []*dsl.Kind {
	var out []*dsl.Kind
	for _, k := range ks {
		if k.Config == nil {
			k = nil
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return []*dsl.Kind{nil}
	}
	return out
}

// suggestField returns "; did you mean 'x'?" for an undefined field of
// outer or inner: the config field closest to the one written; for a field
// of the entry rather than its config (name), it says so.
func (t *typedEnv) suggestField(src string, is *celIssue, kinds map[string]*dsl.Kind) string {
	name, ok := strings.CutPrefix(is.message, "undefined field '")
	if !ok || !strings.HasSuffix(name, "'") {
		return ""
	}
	name = strings.TrimSuffix(name, "'")
	// is.offset is the field name's start: the operand ends before the
	// blanks, '?' and '.' of the selection.
	end := is.offset
	for end > 0 && strings.IndexByte(" \t\r\n?", src[end-1]) >= 0 {
		end--
	}
	if end == 0 || src[end-1] != '.' {
		return ""
	}
	operand := strings.TrimRight(src[:end-1], " \t\r\n")
	for v, k := range kinds {
		if k == nil || !strings.HasSuffix(operand, v) {
			continue
		}
		if before := operand[:len(operand)-len(v)]; before != "" && isIdentByte(before[len(before)-1]) {
			continue
		}
		names := t.prov.objects[configTypeName(k)].names
		if slices.Contains(entryFields, name) {
			return fmt.Sprintf(": %s is the entry's, not part of the config of %s (%s)", name, k.ID, strings.Join(names, ", "))
		}
		if best := textdist.Closest(name, names); best != "" {
			return fmt.Sprintf("; did you mean '%s'?", best)
		}
	}
	return ""
}

// entryFields are the fields every entry has (#EntryBase), which a
// constraint's when does not see: outer and inner are the layers' configs.
var entryFields = []string{"use", "name", "when", "tools"}

func isIdentByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
