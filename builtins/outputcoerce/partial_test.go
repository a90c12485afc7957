package outputcoerce

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const prefixSchema = `{"type":"object","additionalProperties":false,"required":["answer"],
	"properties":{
		"answer":{"type":"string","maxLength":5},
		"tags":{"type":"array","maxItems":2,"items":{"type":"string"}},
		"kind":{"enum":["a","b"]},
		"n":{"$ref":"#/$defs/small"},
		"meta":{"type":"object","patternProperties":{"^x-":{"type":"integer"}}}},
	"$defs":{"small":{"type":"integer","maximum":3}}}`

// TestPrefixChecker feeds outputs byte by byte and checks the offset of the
// first byte the checker refuses (-1: none) and the diagnostics.
func TestPrefixChecker(t *testing.T) {
	s, err := Compile(json.RawMessage(prefixSchema))
	require.NoError(t, err)
	tests := []struct {
		name   string
		out    string
		failAt int // index of the refused byte; len(out): at the end; -1 valid
		diags  []Diagnostic
	}{
		{"valid", `{"answer":"yes","tags":["a"],"n":2}`, -1, nil},
		{"valid fenced", "```json\n{\"answer\":\"ok\"}\n```\nthat is all", -1, nil},
		{"valid escapes", `{"answer":"\u00e9\n"}`, -1, nil},
		{"root of the wrong type", `["answer"]`, 0, []Diagnostic{{Path: "", Message: "expected object, but got array"}}},
		{"member of the wrong type", `{"answer":42}`, 10, []Diagnostic{{Path: "/answer", Message: "expected string, but got number"}}},
		{"unknown member", `{"answer":"x","extra":1}`, 20, []Diagnostic{{Path: "", Message: "additionalProperties 'extra' not allowed"}}},
		{"string too long, at its end", `{"answer":"toolong"}`, 18, []Diagnostic{{Path: "/answer", Message: "length must be <= 5, but got 7"}}},
		{"too many items, at the third", `{"answer":"x","tags":["a","b","c"]}`, 30, []Diagnostic{{Path: "/tags", Message: "maximum 2 items required, but found more"}}},
		{"element of the wrong type", `{"answer":"x","tags":[1]}`, 22, []Diagnostic{{Path: "/tags/0", Message: "expected string, but got number"}}},
		{"enum of another kind", `{"answer":"x","kind":1}`, 21, []Diagnostic{{Path: "/kind", Message: "no allowed value is a number"}}},
		{"enum value", `{"answer":"x","kind":"c"}`, 23, []Diagnostic{{Path: "/kind", Message: "value must be one of \"a\", \"b\""}}},
		{"through $ref, at the number's end", `{"answer":"x","n":7}`, 19, []Diagnostic{{Path: "/n", Message: "must be <= 3 but found 7"}}},
		{"patternProperties", `{"answer":"x","meta":{"x-a":"s"}}`, 28, []Diagnostic{{Path: "/meta/x-a", Message: "expected integer, but got string"}}},
		{"required, at the closing brace", `{"tags":[]}`, 10, []Diagnostic{{Path: "", Message: "missing properties: 'answer'"}}},
		{"syntax", `{"answer" "x"}`, 10, []Diagnostic{{Message: "not valid JSON: invalid character '\"' after an object key at offset 10"}}},
		{"a second value", `{"answer":"x","kind":"a"} null`, 26, []Diagnostic{{Message: "not valid JSON: invalid character 'n' after the value at offset 26"}}},
		{"literal of the wrong type", `{"answer":tru`, 10, []Diagnostic{{Path: "/answer", Message: "expected string, but got boolean"}}},
		{"bad number", `{"answer":"x","n":01}`, 19, []Diagnostic{{Message: "not valid JSON: invalid character '1' in a number at offset 19"}}},
		{"prose before the value", `Sure: {"answer":"x"}`, 0, []Diagnostic{{Message: "not valid JSON: invalid character 'S' looking for a value at offset 0"}}},
		{"trailing data", `{"answer":"x"} more`, 15, []Diagnostic{{Message: "not valid JSON: invalid character 'm' after the value at offset 15"}}},
		{"cut short", `{"answer":"x"`, 13, []Diagnostic{{Message: "not valid JSON: unexpected end of JSON input at offset 13"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &prefixChecker{root: s}
			at := -1
			for i := 0; i < len(tt.out); i++ {
				if !p.write(tt.out[i : i+1]) {
					at = i
					break
				}
			}
			if at < 0 {
				p.finish()
				if p.failed() {
					at = len(tt.out)
				}
			}
			assert.Equal(t, tt.failAt, at)
			assert.Equal(t, tt.diags, p.diags)
			if tt.failAt < 0 {
				assert.True(t, p.complete())
				_, v, diags := (&Coerce{schema: s}).Check(tt.out)
				assert.Empty(t, diags, "the full check agrees")
				assert.Equal(t, v, p.value, "the value is the one the full check parses")
			}
		})
	}
}

// TestPrefixCheckerAgreesWithTheFullCheck: for a bare JSON value, the
// checker accepts exactly the outputs the full check accepts, whatever the
// chunking.
func TestPrefixCheckerAgreesWithTheFullCheck(t *testing.T) {
	s, err := Compile(json.RawMessage(prefixSchema))
	require.NoError(t, err)
	outs := []string{
		`{"answer":"yes"}`, `{"answer":"yes","tags":["a","b"]}`, `{"answer":"toolong"}`,
		`{"answer":"x","n":3}`, `{"answer":"x","n":3.5}`, `{"answer":"x","n":-1e2}`, ` {"answer":"x"} `,
		`{"answer":"x","meta":{"y":true}}`, `{}`, `[]`, `"answer"`, `{"answer":"x",}`, `{"answer":"\x"}`, `{"answer":"x","kind":nul1}`, `{"answer":"x","kind":null}`,
		`{"answer":"x","meta":{"x-1":2,"x-2":1.5}}`, `{"answer":"x","n":1,"n":2}`, `{"answer":"x","Answer":"y"}`, `{"answer":"x","meta":{"k":1,"\u212a":2}}`, `{"answer":"x","meta":{"k":{"a":1},"K":2}}`,
		"```json\n{\"answer\":\"```\"}\n```", "```\n{\"answer\":\"x\",\"tags\":[\"```sh\\nls\\n```\"]}```",
	}
	for _, out := range outs {
		_, _, full := (&Coerce{schema: s}).Check(out)
		for _, chunk := range []int{1, 3, len(out)} {
			p := &prefixChecker{root: s}
			for i := 0; i < len(out); i += chunk {
				if !p.write(out[i:min(i+chunk, len(out))]) {
					break
				}
			}
			p.finish()
			assert.Equal(t, len(full) == 0, !p.failed(), "%s in chunks of %d: %v", out, chunk, p.diags)
		}
	}
}

// TestPrefixCheckerDeepNesting: the checks of completed containers are
// bounded, so a value nested 4,000 deep under a recursive schema is read in
// a small multiple of the time its whole validation takes (each enclosing
// container checked anew made it quadratic: over a minute), and an invalid
// leaf deep down is still refused.
func TestPrefixCheckerDeepNesting(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"$defs":{"t":{"type":["array","number"],"items":{"$ref":"#/$defs/t"}}},"$ref":"#/$defs/t"}`))
	require.NoError(t, err)
	const depth = 4000
	out := strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)

	start := time.Now()
	_, _, diags := (&Coerce{schema: s}).Check(out)
	whole := time.Since(start)
	require.Empty(t, diags)

	start = time.Now()
	p := &prefixChecker{root: s}
	p.write(out)
	p.finish()
	partial := time.Since(start)
	require.False(t, p.failed(), "%v", p.diags)
	assert.Less(t, partial, 20*whole+50*time.Millisecond, "partial %v, whole %v", partial, whole)

	bad := &prefixChecker{root: s}
	assert.False(t, bad.write(strings.Repeat("[", depth)+`"x"`), "a string leaf is refused as it completes")
	require.NotEmpty(t, bad.diags)
	assert.Equal(t, depth, strings.Count(bad.diags[0].Path, "/"), "the diagnostic is at the leaf")
}

// TestPrefixCheckerRefusesAKeyGivenTwice: as the full check, the streamed
// check refuses an object giving a key twice, keys differing only in case
// counting as one, at the key.
func TestPrefixCheckerRefusesAKeyGivenTwice(t *testing.T) {
	s, err := Compile(json.RawMessage(prefixSchema))
	require.NoError(t, err)
	for out, key := range map[string]string{
		`{"answer":"x","n":1,"n":2}`:                `"/n"`,
		`{"answer":"x","meta":{"k":1,"\u212a":2}}`:  "\"/meta/\u212a\"",
		`{"answer":"x","meta":{"k":{"a":1},"K":2}}`: `"/meta/K"`,
		`{"answer":"x","meta":{"x-a":1,"X-A":2}}`:   `"/meta/X-A"`,
	} {
		p := &prefixChecker{root: s}
		assert.False(t, p.write(out[:strings.LastIndex(out, ":")]), out)
		require.Len(t, p.diags, 1, out)
		assert.Contains(t, p.diags[0].Message, "the key "+key+" is given twice", out)
	}
}
