package predicate

import (
	"slices"

	"github.com/google/cel-go/common/types"
)

// VariableDoc describes a variable of a stage, for documentation.
type VariableDoc struct {
	// Name is the variable, such as "request".
	Name string
	// Type is its CEL type as cel-go prints it ("agentc.request",
	// "list(agentc.message)", "dyn").
	Type string
	// AfterOnly is set for a variable that exists only in the after phase
	// (a guard with phase: "after"): the call's outcome.
	AfterOnly bool
}

// FieldDoc describes a field of an object type, for documentation.
type FieldDoc struct {
	Name string
	Type string
}

// Variables lists the variables a predicate of stage s can read, before
// and after the call. The tool stage's args is listed as a map of dyn: an
// entry scoped with tools: to tools with schemas sees it typed.
func Variables(s Stage) []VariableDoc {
	var out []VariableDoc
	before := map[string]bool{}
	for _, v := range stageVariables(s, Before) {
		before[v.name] = true
		out = append(out, VariableDoc{Name: v.name, Type: v.typ.String()})
	}
	if s == Tool {
		out = append(out, VariableDoc{Name: "args", Type: types.NewMapType(types.StringType, types.DynType).String()})
	}
	if s == State {
		// Typed from the field's schema and from every field's.
		out = append(out, VariableDoc{Name: "value", Type: types.DynType.String()},
			VariableDoc{Name: "state", Type: types.NewMapType(types.StringType, types.DynType).String()})
		return out
	}
	if s != Admit {
		for _, v := range stageVariables(s, After) {
			if !before[v.name] {
				out = append(out, VariableDoc{Name: v.name, Type: v.typ.String(), AfterOnly: true})
			}
		}
	}
	return out
}

// ObjectTypes lists the names of the fixed object types the variables use
// ("agentc.request"), sorted.
func ObjectTypes() []string {
	var out []string
	for name := range fixedObjects {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// ObjectFields lists the fields of a fixed object type with their types,
// sorted by name; ok is false for a name that is not one.
func ObjectFields(typeName string) (fields []FieldDoc, ok bool) {
	o, ok := fixedObjects[typeName]
	if !ok {
		return nil, false
	}
	for _, name := range o.names {
		fields = append(fields, FieldDoc{Name: name, Type: o.fields[name].ft.Type.String()})
	}
	return fields, true
}
