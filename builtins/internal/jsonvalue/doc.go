// Package jsonvalue rewrites the strings (object keys included) of JSON-like values (what
// encoding/json decodes into any, plus the map[string]string and []string
// that hosts pass as tool arguments) for the builtins that redact them.
package jsonvalue
