package plan

import (
	"encoding/json"
	"maps"
	"slices"
)

// The ops of a state field, and the phases of their handlers' predicates.
const (
	StateOnSet    = "on_set"
	StateOnAppend = "on_append"
)

// ObjectSchema returns the JSON Schema that types the CEL variable `state`
// of the state handlers: an object whose properties are the fields, each
// with its schema (true: any JSON).
func (s *State) ObjectSchema() json.RawMessage {
	props := map[string]json.RawMessage{}
	for _, name := range slices.Sorted(maps.Keys(s.Fields)) {
		sch := s.Fields[name].Schema
		if len(sch) == 0 {
			sch = json.RawMessage("true")
		}
		props[name] = sch
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
	return b
}

// ValueSchema returns the JSON Schema of the value the handlers of op see:
// the field's schema for on_set, its items schema for on_append (nil: any
// JSON).
func (f *StateField) ValueSchema(op string) json.RawMessage {
	if op != StateOnAppend || len(f.Schema) == 0 {
		return f.Schema
	}
	var s struct {
		Items json.RawMessage `json:"items"`
	}
	if json.Unmarshal(f.Schema, &s) != nil {
		return nil
	}
	return s.Items
}
