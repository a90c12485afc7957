// Package resultjson reads a tool's result as the JSON value its
// result_schema describes. output_coerce checks a result by that value and
// guard reads it as `result`, so that both agree on what a result is: the
// structured content of an MCP result that has one, the value raw JSON
// bytes hold, and, where the schema refuses a string, the value a string
// result is the JSON text of (most MCP servers, and many HTTP tools, answer
// JSON as text).
package resultjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/jsonwalk"
)

var errRemoteRef = errors.New("remote references are not allowed")

// Compile compiles a JSON Schema (draft 2020-12). A JSON string holding the
// schema's text is unwrapped; remote references are refused.
func Compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New("a JSON Schema object is required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(strings.TrimSpace(s), "{") {
			return nil, fmt.Errorf("%q is a file path: compile the policy so that the file is read into the plan", s)
		}
		raw = json.RawMessage(s)
	}
	if raw[0] != '{' {
		return nil, errors.New("the schema must be a JSON object")
	}
	comp := jsonschema.NewCompiler()
	comp.Draft = jsonschema.Draft2020
	comp.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("%w: %s", errRemoteRef, u)
	}
	const url = "agentc:output_coerce.schema.json"
	if err := comp.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, err
	}
	return comp.Compile(url)
}

// Parse parses text as one JSON value (numbers as json.Number). A text
// whose object gives a key twice, keys differing only in case counting as
// one, is refused: the value read holds the last of them, while the
// parser of the text's reader may read the first (or, as Go's
// encoding/json into a struct, a key in another case as the field).
func Parse(text string) (any, error) {
	if v, ok := decodeOnce([]byte(text)); ok {
		return v, nil
	}
	return parseTwoPasses(text)
}

// parseTwoPasses reads text as Parse does, in two passes, the first for
// a key given twice (jsonwalk.RepeatedKey), the second by encoding/json:
// it says why a text that decodeOnce does not read is refused.
func parseTwoPasses(text string) (any, error) {
	if key, ok := jsonwalk.RepeatedKey([]byte(text)); ok {
		return nil, errors.New("not valid JSON: " + RepeatedKeyProblem(key))
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("not valid JSON: " + strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: " + errTrailing.Error())
	}
	return v, nil
}

// RepeatedKeyProblem is the problem of a text giving key (a quoted JSON
// pointer) twice.
func RepeatedKeyProblem(key string) string {
	return "the key " + key + " is given twice (keys differing only in case count as one), and parsers differ on which one they read"
}

// Data is a tool result as JSON data, with its JSON text: raw JSON bytes
// ([]byte, json.RawMessage) are parsed (refused, as by Parse, when an
// object gives a key twice or the bytes hold more than one value), any other value is marshalled and parsed back
// (numbers as json.Number); the structured content of an MCP result stands
// for the result.
func Data(v any) (any, string, error) {
	switch r := v.(type) {
	case json.RawMessage:
		return dataOfText(r)
	case []byte:
		return dataOfText(r)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, "", err
	}
	return decodeData(raw)
}

// dataOfText is Data of raw, text a tool wrote, whose readers read a key
// given twice apart (Parse).
func dataOfText(raw []byte) (any, string, error) {
	if out, ok := decodeOnce(raw); ok {
		return dataOf(out, raw)
	}
	return dataTwoPasses(raw)
}

// dataTwoPasses is dataOfText in two passes, as parseTwoPasses: it says
// why a text that decodeOnce does not read is refused.
func dataTwoPasses(raw []byte) (any, string, error) {
	if key, ok := jsonwalk.RepeatedKey(raw); ok {
		return nil, string(raw), errors.New(RepeatedKeyProblem(key))
	}
	return decodeData(raw)
}

// errTrailing refuses a text that holds more than one JSON value: its
// reader reads all of it, where a check of the first value would pass it.
var errTrailing = errors.New("trailing data after the value")

// decodeData is Data of the JSON value raw holds, by encoding/json; raw
// holding more than one value is refused (errTrailing).
func decodeData(raw []byte) (any, string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, string(raw), err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, string(raw), errTrailing
	}
	return dataOf(out, raw)
}

// dataOf is Data's answer for out, the value read from raw.
func dataOf(out any, raw []byte) (any, string, error) {
	if sc, ok := structuredContent(out); ok {
		b, err := json.Marshal(sc)
		if err != nil {
			return nil, "", err
		}
		return sc, string(b), nil
	}
	return out, string(raw), nil
}

// structuredContent returns the structured content of an MCP tool result
// (an object holding a "content" list and a "structuredContent" value that
// is not null), and whether v is one. A tool that declares an outputSchema
// returns its value there, the contents being its text rendering for
// clients that do not read it, so a result schema is written for it.
func structuredContent(v any) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	if _, ok := m["content"].([]any); !ok {
		return nil, false
	}
	sc, ok := m["structuredContent"]
	return sc, ok && sc != nil
}

// Encoded returns the value str is the JSON text of, when it is the JSON
// text of a value other than a string. A string result that its schema
// refuses is read by that value: it is how a tool answering JSON as text
// (an MCP server without an outputSchema) says what it means.
func Encoded(str string) (any, bool) {
	v, err := Parse(str)
	if err != nil {
		return nil, false
	}
	if _, ok := v.(string); ok {
		return nil, false
	}
	return v, true
}

// Value is the tool result v as a reader of a tool with the result schema
// s (nil: none) sees it; v itself is not changed. Without a schema it is v.
// With one, the structured content of an MCP result (a map) stands for it,
// raw JSON bytes are read as the value they hold, and a string (or raw
// bytes holding one) that s refuses but that is the JSON text of another
// value is read as that value. Any other v is v: a result that is not
// valid JSON, or a Go value, reads as today.
func Value(s *jsonschema.Schema, v any) any {
	if s == nil {
		return v
	}
	switch r := v.(type) {
	case string:
		return encodedOr(s, r, v)
	case []byte, json.RawMessage:
		data, _, err := Data(r)
		if err != nil {
			return v
		}
		if str, ok := data.(string); ok {
			return encodedOr(s, str, str)
		}
		return data
	case map[string]any:
		if sc, ok := structuredContent(r); ok {
			return sc
		}
	}
	return v
}

// encodedOr is the value str encodes when s refuses str and it is the
// JSON text of a value other than a string, else orig.
func encodedOr(s *jsonschema.Schema, str string, orig any) any {
	if s.Validate(str) == nil {
		return orig
	}
	if enc, ok := Encoded(str); ok {
		return enc
	}
	return orig
}
