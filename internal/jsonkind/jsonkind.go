// Package jsonkind names the kind of a JSON value in messages, in one
// wording for the plan's loader, argument paths and predicate schemas:
// "null", "a string", "a boolean", "a number", "an array", "an object".
package jsonkind

import (
	"encoding/json"
	"fmt"
)

// Of names the kind of a decoded JSON value (as encoding/json decodes
// into any, with or without UseNumber): "null", "a string", "a boolean",
// "a number", "an array", "an object". A Go value of no JSON kind is named
// by its type ("a Go chan int").
func Of(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int64, int32, uint, uint64, uint32:
		return "a number"
	case []any, []string:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a Go %T", v)
}

// Of a kind of value a schema names ("string", "int", "list", "struct"...),
// the words a message uses for it.
var words = map[string]string{
	"null": "null", "string": "a string", "bool": "a boolean", "boolean": "a boolean",
	"int": "an integer", "integer": "an integer", "float": "a number", "number": "a number",
	"list": "an array", "array": "an array", "struct": "an object", "map": "an object", "object": "an object",
}

// Named gives the words for a kind as a schema names it: "int" is
// "an integer", "list" "an array", "struct" and "map" "an object"; ok is
// false for a name it does not know.
func Named(kind string) (string, bool) {
	w, ok := words[kind]
	return w, ok
}
