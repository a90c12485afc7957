package dsl

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// ClosedArgNames knows a tool's arguments only when its schema lists every
// argument the tool may be sent.
func TestClosedArgNames(t *testing.T) {
	for _, tt := range []struct {
		schema string
		known  bool
	}{
		{`{"type":"object","additionalProperties":false,"properties":{"a":{},"b":{}}}`, true},
		{`{"type":"object","properties":{"a":{}}}`, false},                                                  // additionalProperties defaults to true
		{`{"type":"object","additionalProperties":true,"properties":{"a":{}}}`, false},                      // open
		{`{"type":"object","additionalProperties":{"type":"string"},"properties":{"a":{}}}`, false},         // a schema for the rest
		{`{"additionalProperties":false,"properties":{"a":{}},"patternProperties":{"^x_":{}}}`, false},      // patterns
		{`{"additionalProperties":false,"properties":{"a":{}},"allOf":[{"properties":{"b":{}}}]}`, false},   // a composition
		{`{"additionalProperties":false,"properties":{"a":{}},"$ref":"#/$defs/x","$defs":{"x":{}}}`, false}, // a reference
		{`{"additionalProperties":false}`, false},                                                           // no properties
		{``, false},
	} {
		names, known := (&Tool{Args: json.RawMessage(tt.schema)}).ClosedArgNames()
		assert.Equal(t, tt.known, known, tt.schema)
		if tt.known {
			assert.Equal(t, []string{"a", "b"}, names)
		} else {
			assert.Nil(t, names, tt.schema)
		}
	}
}
