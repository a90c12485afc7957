package compiler

import (
	"sort"
	"strings"
	"sync"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime"
)

var (
	schemaMu    sync.Mutex
	schemaKey   string
	schemaCache *dsl.Schema
)

// DefaultSchema returns the schema of the builtins plus every custom
// middleware registered with the runtime (runtime.Register) whose id is not
// a builtin's. It is rebuilt when the set of registered middlewares changes.
func DefaultSchema() (*dsl.Schema, error) {
	base, err := dsl.DefaultSchema()
	if err != nil {
		return nil, err
	}
	var custom []dsl.CustomKind
	for _, m := range runtime.Modules() {
		if base.Catalog().Lookup(m.ID) != nil {
			continue // a builtin's implementation; its schema is embedded
		}
		k := dsl.CustomKind{ID: m.ID, Repeatable: m.Repeatable, DistinctBy: m.DistinctBy, Doc: m.Doc, Schema: m.ConfigSchema}
		for _, s := range m.Stages {
			k.Stages = append(k.Stages, string(s))
		}
		for _, t := range m.Traits {
			k.Traits = append(k.Traits, string(t))
		}
		for _, c := range m.Constraints {
			dc := &dsl.Constraint{ID: c.ID, Stage: string(c.Stage), Outer: c.Outer, Inner: c.Inner, Severity: dsl.Severity(c.Severity), Why: c.Why}
			if c.When != "" {
				dc.When = &dsl.Expr{Source: c.When}
			}
			k.Constraints = append(k.Constraints, dc)
		}
		custom = append(custom, k)
	}
	if len(custom) == 0 {
		return base, nil
	}
	sort.Slice(custom, func(i, j int) bool { return custom[i].ID < custom[j].ID })
	var key strings.Builder
	for _, k := range custom {
		key.WriteString(k.ID + "\x00" + k.Schema + "\x00" + strings.Join(k.Stages, ",") + "\x00")
		for _, c := range k.Constraints {
			key.WriteString(c.Key() + "\x00")
		}
	}
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if schemaCache != nil && schemaKey == key.String() {
		return schemaCache, nil
	}
	s, err := dsl.NewSchema(custom)
	if err != nil {
		return nil, err
	}
	schemaCache, schemaKey = s, key.String()
	return s, nil
}
