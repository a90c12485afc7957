package compiler

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResultFields(t *testing.T) {
	for _, tc := range []struct {
		schema string
		fields []string
		ok     bool
	}{
		{`{"type":"object","properties":{"b":{},"a":{}}}`, []string{"a", "b"}, true},
		{`{"type":"object","properties":{"a":{}},"additionalProperties":false}`, []string{"a"}, true},
		{`{"type":"object","properties":{"a":{}},"additionalProperties":true}`, nil, false},
		{`{"type":"object","properties":{"a":{}},"patternProperties":{"^x":{}}}`, nil, false},
		{`{"anyOf":[{"type":"object"}]}`, nil, false},
		{`{"type":"object"}`, nil, false},
		{`{"type":"string"}`, nil, true},
		{`{"type":["object","null"],"properties":{"a":{}}}`, []string{"a"}, true},
	} {
		fields, ok := resultFields(json.RawMessage(tc.schema))
		assert.Equal(t, tc.ok, ok, tc.schema)
		assert.Equal(t, tc.fields, fields, tc.schema)
	}
}
