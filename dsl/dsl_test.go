package dsl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"cuelang.org/go/cue/cuecontext"
)

// loadSnippet loads "package p" followed by src as a one-file policy and
// returns the policy, its diagnostics and each as "line:col rule".
func loadSnippet(t *testing.T, src string) (*Policy, Diagnostics, []string) {
	t.Helper()
	dir := writePolicy(t, map[string]string{"p.cue": "package p\n\n" + src + "\n"})
	p, diags, err := Load(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%d:%d %s", d.Pos.Line, d.Pos.Col, d.Rule))
	}
	return p, diags, got
}

func writePolicy(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	return dir
}

func TestLoadDecodes(t *testing.T) {
	dir := writePolicy(t, map[string]string{
		"a.cue": `package p

models: m: {usd_per_mtok_in: 1.5}
tools: refund: {side_effecting: true, args: {type: "object", properties: amount: type: "number"}}
chains: tool: [
	{use: "guard", name: "limit", tools: ["refund"], deny: "args.amount > 10.0"},
	{use: "retry"},
]
`,
		"b.cue": `package p

admit: "item.score > 0.5"
`,
		"a_test.cue": `this is a test file and is not part of the policy`,
	})
	p, diags, err := Load(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.Empty(t, diags)
	require.NotNil(t, p)
	assert.Equal(t, "p", p.Package)
	assert.Len(t, p.Files, 2)
	assert.Equal(t, 1.5, p.Models["m"].USDPerMTokIn)
	assert.True(t, p.Tools["refund"].SideEffecting)
	assert.JSONEq(t, `{"type":"object","properties":{"amount":{"type":"number"}}}`, string(p.Tools["refund"].Args))
	require.Len(t, p.Chains["tool"], 2)
	g := p.Chains["tool"][0]
	assert.Equal(t, "limit", g.Name)
	assert.Equal(t, []string{"refund"}, g.Tools)
	assert.Equal(t, Pos{File: filepath.Join(dir, "a.cue"), Line: 6, Col: 2}, g.Pos)
	assert.Equal(t, "closed", g.Fields["on_error"], "defaults are applied")
	deny := g.Expr("deny")
	require.NotNil(t, deny)
	assert.Equal(t, 6, deny.Pos.Line)
	r := p.Chains["tool"][1]
	assert.Equal(t, "retry", r.Name)
	assert.EqualValues(t, 3, r.Fields["max_attempts"])
	require.NotNil(t, p.Admit)
	assert.Equal(t, Pos{File: filepath.Join(dir, "b.cue"), Line: 3, Col: 8}, p.Admit.Pos)
}

func TestExprPosAt(t *testing.T) {
	tests := []struct {
		name   string
		src    string // the CUE line(s) after "x: "
		offset int    // byte offset into the decoded string
		line   int
		col    int
	}{
		{"plain", `"args.ammount > 1"`, 5, 3, 14},
		{"after escape", `"a == \"b\" && c"`, 11, 3, 22},
		{"unicode escape", `"'\u00e9' == c"`, 6, 3, 19},
		{"raw string", `#"a \ b"#`, 4, 3, 14},
		{"multi-line", "\"\"\"\n\t\tfirst &&\n\t\tsecond\n\t\t\"\"\"", 9, 5, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writePolicy(t, map[string]string{"p.cue": "package p\n\nadmit: " + tt.src + "\n"})
			p, diags, err := Load(context.Background(), []string{dir}, Options{})
			require.NoError(t, err)
			require.Empty(t, diags)
			got := p.Admit.PosAt(tt.offset)
			assert.Equal(t, tt.line, got.Line, "line")
			assert.Equal(t, tt.col, got.Col, "col")
		})
	}
}

func TestLoadIOErrors(t *testing.T) {
	empty := t.TempDir()
	_, _, err := Load(context.Background(), []string{empty}, Options{})
	var ioe *IOError
	require.ErrorAs(t, err, &ioe)
	assert.Contains(t, err.Error(), "no .cue files")

	_, _, err = Load(context.Background(), []string{filepath.Join(empty, "missing")}, Options{})
	require.ErrorAs(t, err, &ioe)
	assert.Contains(t, err.Error(), "no such file or directory")

	txt := filepath.Join(empty, "p.txt")
	require.NoError(t, os.WriteFile(txt, []byte("x"), 0o644))
	_, _, err = Load(context.Background(), []string{txt}, Options{})
	require.ErrorAs(t, err, &ioe)
}

func TestLoadTimeout(t *testing.T) {
	// An exponential blow-up that CUE would take very long to evaluate.
	var b strings.Builder
	b.WriteString("package p\n\n#T0: {a: int} | {b: int}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "#T%d: {x: #T%d, y: #T%d} | {z: #T%d}\n", i, i-1, i-1, i-1)
	}
	b.WriteString("v: #T40 & {x: y: x: y: _}\n")
	dir := writePolicy(t, map[string]string{"p.cue": b.String()})
	start := time.Now()
	_, diags, err := Load(context.Background(), []string{dir}, Options{Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.NotEmpty(t, diags, "a pathological policy must not load silently")
	assert.True(t, diags.HasErrors())
}

func TestSuggest(t *testing.T) {
	s, err := DefaultSchema()
	require.NoError(t, err)
	c := s.Catalog()
	assert.Equal(t, "retry", c.Suggest("retyr"))
	assert.Equal(t, "rate_limit", c.Suggest("ratelimit"))
	assert.Equal(t, "output_coerce", c.Suggest("output_corce"))
	assert.Equal(t, "", c.Suggest("kubernetes"))
	assert.Len(t, c.IDs(), 25)
}

// TestCatalogNestedBounds: the fields of a config's nested structs are in
// the catalog by their dotted path, with their bounds or as durations
// (true: above zero), as the top-level ones are, so that vet and the plan
// loader hold them to the schema alike.
func TestCatalogNestedBounds(t *testing.T) {
	s, err := DefaultSchema()
	require.NoError(t, err)
	c := s.Catalog()
	var nested []string
	for _, id := range c.IDs() {
		k := c.Lookup(id)
		for path := range k.Bounds {
			if strings.Contains(path, ".") {
				nested = append(nested, id+" "+path)
			}
		}
		for path, positive := range k.Durations {
			if strings.Contains(path, ".") {
				nested = append(nested, fmt.Sprintf("%s %s duration positive=%v", id, path, positive))
			}
		}
	}
	assert.ElementsMatch(t, []string{
		"meter budget.calls", "meter budget.tokens", "meter budget.usd",
		"retry breaker.failures", "retry breaker.cooldown duration positive=true",
		"security classifier.threshold", "security classifier.timeout duration positive=false",
	}, nested)
	assert.Equal(t, Bound{Min: 1, Max: 1000, HasMin: true, HasMax: true}, c.Lookup("retry").Bounds["breaker.failures"])
	assert.Equal(t, map[string]bool{"attempt_timeout": false, "breaker.cooldown": true, "idle_timeout": false, "initial_delay": false, "max_delay": false}, c.Lookup("retry").Durations)
}

func TestCustomKind(t *testing.T) {
	s, err := NewSchema([]CustomKind{{ID: "sentiment", Stages: []string{"chat"}, Schema: `threshold: *0.5 | number & >0 & <=1`}})
	require.NoError(t, err)
	// Its numeric fields' bounds, default beside, as a builtin's.
	assert.Equal(t, map[string]Bound{"threshold": {Min: 0, Max: 1, HasMin: true, HasMax: true, MinOpen: true}}, s.Catalog().Lookup("sentiment").Bounds)
	assert.Equal(t, Bound{Min: 1, Max: 10, HasMin: true, HasMax: true}, s.Catalog().Lookup("retry").Bounds["max_attempts"])
	ok := writePolicy(t, map[string]string{"p.cue": "package p\nchains: chat: [{use: \"sentiment\", threshold: 0.7}]\n"})
	p, diags, err := Load(context.Background(), []string{ok}, Options{Schema: s})
	require.NoError(t, err)
	require.Empty(t, diags)
	assert.JSONEq(t, `{"threshold":0.7}`, string(p.Chains["chat"][0].Config))

	bad := writePolicy(t, map[string]string{"p.cue": "package p\nchains: tool: [{use: \"sentiment\", threshold: 7}]\n"})
	_, diags, err = Load(context.Background(), []string{bad}, Options{Schema: s})
	require.NoError(t, err)
	rules := map[string]bool{}
	for _, d := range diags {
		rules[d.Rule] = true
	}
	assert.True(t, rules["schema/invalid-value"], "%v", diags)
	assert.True(t, rules["schema/stage"], "%v", diags)

	_, err = NewSchema([]CustomKind{{ID: "retry", Stages: []string{"chat"}}})
	assert.ErrorContains(t, err, "already defined")
	_, err = NewSchema([]CustomKind{{ID: "x", Stages: []string{"chat"}, Schema: "a: {"}})
	assert.ErrorContains(t, err, "config schema")
}

// generatedPolicy returns a realistic policy of about n lines.
func generatedPolicy(n int) string {
	var b strings.Builder
	b.WriteString("package gen\n\nmodels: {\n\tprimary: {usd_per_mtok_in: 3, usd_per_mtok_out: 15}\n\tbackup: {usd_per_mtok_in: 0.5, usd_per_mtok_out: 1.5}\n}\n\ntools: {\n")
	lines := 8
	i := 0
	for lines < n-30 {
		fmt.Fprintf(&b, "\ttool_%d: {\n\t\tside_effecting: %v\n\t\targs: {\n\t\t\ttype: \"object\"\n\t\t\tproperties: {\n\t\t\t\tid: {type: \"string\", maxLength: 64}\n\t\t\t\tn: {type: \"integer\"}\n\t\t\t}\n\t\t}\n\t}\n", i, i%3 == 0)
		lines += 10
		i++
	}
	b.WriteString("}\n\nchains: {\n\tchat: [\n\t\t{use: \"tracing\"},\n\t\t{use: \"compaction\", max_tokens: 12000},\n\t\t{use: \"meter\", budget: usd: 2},\n\t\t{use: \"fallback\", models: [\"primary\", \"backup\"]},\n\t\t{use: \"retry\", max_attempts: 3},\n\t]\n\ttool: [\n\t\t{use: \"tracing\"},\n\t\t{use: \"meter\"},\n\t\t{use: \"guard\", tools: [\"tool_0\"], deny: \"args.n > 10\"},\n\t\t{use: \"idempotent\"},\n\t\t{use: \"audit\", trail: \"logical\"},\n\t]\n\tturn: [{use: \"rate_limit\", rate: 30, per: \"1m\"}, {use: \"audit\"}]\n}\n\nadmit: \"item.score > 0.5\"\n")
	return b.String()
}

func TestGeneratedPolicyLoads(t *testing.T) {
	src := generatedPolicy(200)
	assert.InDelta(t, 200, strings.Count(src, "\n"), 15)
	dir := writePolicy(t, map[string]string{"p.cue": src})
	_, diags, err := Load(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	assert.Empty(t, diags)
}

func BenchmarkLoad200(b *testing.B) {
	dir := writePolicy(b, map[string]string{"p.cue": generatedPolicy(200)})
	s, err := DefaultSchema()
	require.NoError(b, err)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, diags, err := Load(context.Background(), []string{dir}, Options{Schema: s})
		if err != nil || len(diags) > 0 || p == nil {
			b.Fatal(err, diags)
		}
	}
}

func TestEmbeddedSchemaBuilds(t *testing.T) {
	s, err := DefaultSchema()
	require.NoError(t, err)
	_, err = s.build(cuecontext.New())
	require.NoError(t, err, "the generated #Entry must evaluate with every builtin")
}

// A name used twice in a chain is reported under the entry's path, as the
// schema's errors are.
func TestDuplicateNameNamesThePath(t *testing.T) {
	_, diags, _ := loadSnippet(t, `chains: tool: [
	{use: "guard", name: "limit", deny: "false"},
	{use: "guard", name: "limit", deny: "true"},
]
chains: chat: [{use: "retry"}, {use: "retry"}]`)
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, fmt.Sprintf("%d:%d %s", d.Pos.Line, d.Pos.Col, d.Message))
	}
	assert.Equal(t, []string{
		`5:23 chains.tool[1].name: entry name "limit" is already used at line 4; names must be unique in a chain`,
		`7:32 chains.chat[1]: a second unnamed retry entry (the first is at column 16): an unnamed entry is named after its use, and names must be unique in a chain; give it a name`,
	}, msgs)
}

// A name already reported as not a name is not also reported as used twice,
// nor taken for its use's name by a later unnamed entry.
func TestInvalidNameIsNotADuplicate(t *testing.T) {
	_, diags, _ := loadSnippet(t, `chains: tool: [
	{use: "guard", deny: "args.x > 500.0"},
	{use: "guard", deny: "args.x > 100.0"},
	{use: "guard", name: "refund limit", deny: "args.x > 100.0"},
]
chains: chat: [{use: "retry", name: "my retry"}, {use: "retry"}]`)
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, fmt.Sprintf("%d:%d %s", d.Pos.Line, d.Pos.Col, d.Message))
	}
	assert.Equal(t, []string{
		`5:2 chains.tool[1]: a second unnamed guard entry (the first is at line 4): an unnamed entry is named after its use, and names must be unique in a chain; give it a name`,
		`6:23 chains.tool[2].name: "refund limit" is not a name: a name is ASCII letters, digits and _ . : / -, and starts with a letter or _`,
		`8:37 chains.chat[0].name: "my retry" is not a name: a name is ASCII letters, digits and _ . : / -, and starts with a letter or _`,
	}, msgs)
}

// An entry without use names the kinds of its chain whose config has its
// fields, with values of their types.
func TestMissingUseNamesTheKinds(t *testing.T) {
	_, diags, _ := loadSnippet(t, `chains: tool: [
	{deny: "args.x > 1"},
	{deny: ["wipe"]},
]
chains: chat: [{ttl: "5m"}]`)
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, d.Message)
	}
	assert.Equal(t, []string{
		`chains.tool[0]: missing required field "use": its fields are those of guard; write use: "guard"`,
		`chains.tool[1]: missing required field "use": its fields are those of tool_policy; write use: "tool_policy"`,
		`chains.chat[0]: missing required field "use": its fields are those of memoize or semantic_memoize; write use: with the one meant`,
	}, msgs)
}

// An entry whose use is misspelt is told so, with the kind its value names.
func TestMisspeltUse(t *testing.T) {
	_, diags, _ := loadSnippet(t, `chains: chat: [{us: "retry", max_attempts: 3}]`)
	require.Len(t, diags, 1)
	assert.Equal(t, `chains.chat[0]: missing required field "use": unknown field "us"; did you mean use: "retry"?`, diags[0].Message)
	assert.Equal(t, 17, diags[0].Pos.Col)
}

// A guard whose deny or require is of the wrong type is told so, not that
// it has neither.
func TestGuardPredicateOfTheWrongType(t *testing.T) {
	_, diags, _ := loadSnippet(t, `chains: tool: [{use: "guard", deny: 5}, {use: "guard", name: "g", require: true}]`)
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, d.Message)
	}
	assert.Equal(t, []string{
		`chains.tool[0].deny: 5 is not allowed here: want a string`,
		`chains.tool[1].require: true is not allowed here: want a string`,
	}, msgs)
}

func TestPolicyHoldsEveryPlaceAFieldIsWritten(t *testing.T) {
	dir := writePolicy(t, map[string]string{
		"a.cue": `package p

tools: refund: {side_effecting: true}
tools: "a.b": {}
chains: tool: [
	{use: "retry"},
	{use: "guard", deny: "false"},
]
`,
		"b.cue": `package p

tools: refund: args: {type: "object"}
`,
	})
	p, diags, err := Load(context.Background(), []string{dir}, Options{KeepPartial: true})
	require.NoError(t, err)
	require.NotNil(t, p, "%v", diags)
	a, b := filepath.Join(dir, "a.cue"), filepath.Join(dir, "b.cue")
	at := func(file string, line, col int) Pos { return Pos{File: file, Line: line, Col: col} }

	// A tool written in two files holds both, from its label to the end of
	// its value.
	assert.True(t, p.Holds(at(a, 3, 8), "tools", "refund"))
	assert.True(t, p.Holds(at(a, 3, 37), "tools", "refund"), "the closing brace")
	assert.True(t, p.Holds(at(b, 3, 22), "tools", "refund"))
	assert.False(t, p.Holds(at(a, 3, 39), "tools", "refund"), "past the closing brace")
	assert.False(t, p.Holds(at(a, 4, 8), "tools", "refund"))
	assert.True(t, p.Holds(at(a, 4, 8), "tools", "a.b"), "a label holding a dot")
	assert.True(t, p.Holds(at(b, 3, 1), "tools"))

	// List elements are indexed by position.
	assert.True(t, p.Holds(at(a, 7, 20), "chains", "tool", "1"))
	assert.False(t, p.Holds(at(a, 7, 20), "chains", "tool", "0"))
	assert.True(t, p.Writes("chains", "tool", "1"))
	assert.False(t, p.Writes("chains", "tool", "2"))
	assert.False(t, p.Writes("models"))

	e := p.Chains["tool"][1]
	assert.True(t, e.Holds(at(a, 7, 20)))
	assert.False(t, e.Holds(at(a, 6, 4)))
}

// A JSON Schema file that is not JSON was reported without the place of
// the fault in it ("invalid character '}' looking for beginning of object
// key string"), leaving a reader to hunt for a trailing comma; the line and
// column in the file are given, and the end of a file cut short. The
// finding is placed there, in the file, with a note of where the policy
// names it, as the file's other faults are; so is a file holding JSON
// that is not an object, at its start.
func TestSchemaFileSyntaxErrorIsPlaced(t *testing.T) {
	for _, tt := range []struct {
		schema, want string
		line, col    int
	}{
		{"{\n  \"type\": \"object\",\n  \"properties\": {\n    \"amount\": {\"type\": \"number\"},\n  }\n}\n",
			`JSON Schema file "refund.json" is not valid JSON at line 5, column 3: invalid character '}' looking for beginning of object key string`, 5, 3},
		{"{\"type\": \"object\"",
			`JSON Schema file "refund.json" is not valid JSON at line 1, column 18: the file ends before the value does (truncated?)`, 1, 18},
		{"\n  [\"type\"]\n",
			`JSON Schema file "refund.json" must hold a JSON object`, 2, 3},
	} {
		dir := writePolicy(t, map[string]string{
			"p.cue":       "package p\n\ntools: refund: args: \"refund.json\"\n",
			"refund.json": tt.schema,
		})
		_, diags, err := Load(context.Background(), []string{dir}, Options{})
		require.NoError(t, err)
		require.Len(t, diags, 1)
		assert.Equal(t, "schema/invalid-value", diags[0].Rule)
		assert.Equal(t, tt.want, diags[0].Message)
		assert.Equal(t, Pos{File: filepath.Join(dir, "refund.json"), Line: tt.line, Col: tt.col}, diags[0].Pos)
		require.Len(t, diags[0].Related, 1)
		assert.Equal(t, Pos{File: filepath.Join(dir, "p.cue"), Line: 3, Col: 22}, diags[0].Related[0].Pos)
	}
}
