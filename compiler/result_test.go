package compiler

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResultReads(t *testing.T) {
	src := "result.note == 'é' && has(result.ok) || result['code'] == 1 || result.contains('x') || [1].exists(r, r == 1)"
	got := resultReads(src)
	var fields []string
	for _, r := range got {
		fields = append(fields, r.field)
		assert.Equal(t, r.field, src[r.offset:r.offset+len(r.field)], "the offset of %s", r.field)
	}
	assert.Equal(t, []string{"note", "ok", "code"}, fields)
	assert.Empty(t, resultReads("type(result) == string"))
}

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
