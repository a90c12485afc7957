package prove

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The strings written for a property satisfy its pattern, its length
// bounds and its format; "a" is written when nothing satisfies them all.
func TestStringsSatisfyTheSchema(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type": "string"}`, "a"},
		{`{"type": "string", "pattern": "^ACC-[0-9]{6,12}$"}`, "ACC-000000"},
		{`{"type": "string", "pattern": "^ORD-[0-9A-Z]{4,20}$"}`, "ORD-0000"},
		{`{"type": "string", "pattern": "^[a-z][a-z0-9.]{1,63}$"}`, "a0"},
		{`{"type": "string", "pattern": "^(foo|bar)+-x?\\d*$", "minLength": 6}`, "foofoo-"},
		{`{"type": "string", "pattern": "[^a-z]", "maxLength": 1}`, "0"},
		{`{"type": "string", "minLength": 3, "maxLength": 5}`, "aaa"},
		{`{"type": "string", "format": "email"}`, "a@example.com"},
		{`{"type": "string", "format": "date-time"}`, "2026-01-01T00:00:00Z"},
		{`{"type": "string", "format": "uri", "pattern": "^https://"}`, "https://example.com/a"},
		{`{"type": "string", "pattern": "\\bA1", "maxLength": 1}`, "a"},
		{`{"type": "string", "pattern": "(", "minLength": 2}`, "aa"},
	} {
		var s schema
		require.NoError(t, json.Unmarshal([]byte(tc.schema), &s))
		got := str(&s)
		assert.Equal(t, tc.want, got, tc.schema)
		if s.Pattern != "" && s.Pattern != "(" && tc.want != "a" {
			assert.Regexp(t, regexp.MustCompile(s.Pattern), got)
		}
	}
}

// Numbers stay within the bounds, exclusive ones and multipleOf included.
func TestNumbersWithinTheBounds(t *testing.T) {
	for _, tc := range []struct {
		schema     string
		small, big float64
	}{
		{`{"type": "number"}`, 1, 1e6},
		{`{"type": "number", "minimum": 0, "maximum": 10000}`, 1, 10000},
		{`{"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 10}`, 6, 9},
		{`{"type": "number", "minimum": 3, "multipleOf": 5, "maximum": 23}`, 5, 20},
		{`{"type": "number", "maximum": 0.5}`, 0.5, 0.5},
	} {
		var s schema
		require.NoError(t, json.Unmarshal([]byte(tc.schema), &s))
		assert.InDelta(t, tc.small, number(&s, false), 1e-9, tc.schema)
		assert.InDelta(t, tc.big, number(&s, true), 1e-9, tc.schema)
	}
}
