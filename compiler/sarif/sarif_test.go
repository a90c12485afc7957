package sarif_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/compiler/sarif"
	"github.com/agentc-dev/agentc/dsl"
)

// schemaFile is the OASIS SARIF 2.1.0 JSON Schema (its draft-07 form, as
// published in the sarif-spec repository's Schemata directory).
const schemaFile = "testdata/sarif-schema-2.1.0.json"

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat = true
	f, err := os.Open(schemaFile)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, c.AddResource("sarif-schema-2.1.0.json", f))
	s, err := c.Compile("sarif-schema-2.1.0.json")
	require.NoError(t, err)
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, b []byte) error {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	return s.Validate(v)
}

// sample are diagnostics of every shape the compiler reports.
func sample(dir string) dsl.Diagnostics {
	return dsl.Diagnostics{
		{Pos: dsl.Pos{File: "p/policy.cue", Line: 4, Col: 31}, Severity: dsl.Error, Rule: "schema/invalid-value", Message: "chains.chat[0].max_attempts: 20 is out of range: want <=10"},
		{Pos: dsl.Pos{File: "p/policy.cue", Line: 11, Col: 2}, Severity: dsl.Error, Rule: "order/audit-trail", Message: "three failed attempts would leave three audit records",
			Related: []dsl.Related{{Pos: dsl.Pos{File: "p/policy.cue", Line: 10, Col: 2}, Message: "retry (max_attempts 3) is here, outside audit"}}},
		{Pos: dsl.Pos{File: "p/policy.cue", Line: 3, Col: 13}, Severity: dsl.Warning, Rule: "order/pii-before-audit", Message: "audit records must never hold raw PII",
			Related: []dsl.Related{{Pos: dsl.Pos{File: "p/other file.cue", Line: 2, Col: 1}, Message: "pii is here"}}},
		{Pos: dsl.Pos{File: filepath.Join(dir, "abs.cue"), Line: 1, Col: 1}, Severity: dsl.Error, Rule: "cue/syntax", Message: "empty file"},
		{Pos: dsl.Pos{File: "p/only-file.cue"}, Severity: dsl.Error, Rule: "cue/syntax", Message: "cannot read file"},
		{Pos: dsl.Pos{}, Severity: dsl.Warning, Rule: "cel/untyped-args", Message: "no position at all"},
	}
}

// TestSchemaValid checks logs against the official SARIF 2.1.0 JSON Schema:
// with every kind of diagnostic, with none, and that the validator does
// reject a log that breaks the schema.
func TestSchemaValid(t *testing.T) {
	s := compileSchema(t)
	dir := t.TempDir()
	for name, ds := range map[string]dsl.Diagnostics{"sample": sample(dir), "clean": nil} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, sarif.Write(&b, ds, sarif.Options{ToolVersion: "v1.2.3", SrcRoot: dir}))
			assert.NoError(t, validate(t, s, b.Bytes()))
		})
	}

	// Break the log in the ways a writer could: the validator must see it.
	for name, breakIt := range map[string]func(m map[string]any){
		"level":      func(m map[string]any) { result(m)["level"] = "fatal" },
		"start line": func(m map[string]any) { region(m)["startLine"] = 0 },
		"version":    func(m map[string]any) { m["version"] = "2.0.0" },
		"no message": func(m map[string]any) { delete(result(m), "message") },
		"extra":      func(m map[string]any) { result(m)["severity"] = "error" },
	} {
		t.Run("rejects/"+name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, sarif.Write(&b, sample(dir), sarif.Options{SrcRoot: dir}))
			var m map[string]any
			require.NoError(t, json.Unmarshal(b.Bytes(), &m))
			breakIt(m)
			bad, err := json.Marshal(m)
			require.NoError(t, err)
			assert.Error(t, validate(t, s, bad))
		})
	}
}

func result(m map[string]any) map[string]any {
	return m["runs"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
}

func region(m map[string]any) map[string]any {
	return result(m)["locations"].([]any)[0].(map[string]any)["physicalLocation"].(map[string]any)["region"].(map[string]any)
}

// TestLog checks what the log says: rule descriptors with help URIs at
// docs/rules.md anchors, results pointing at their descriptor, levels,
// regions, related locations and file URIs.
func TestLog(t *testing.T) {
	dir := t.TempDir()
	log := sarif.New(sample(dir), sarif.Options{ToolVersion: "v1.2.3", SrcRoot: dir})
	require.Len(t, log.Runs, 1)
	run := log.Runs[0]
	assert.Equal(t, "2.1.0", log.Version)
	assert.Equal(t, "agentc", run.Tool.Driver.Name)
	assert.Equal(t, "v1.2.3", run.Tool.Driver.Version)
	assert.Equal(t, "unicodeCodePoints", run.ColumnKind)
	assert.Equal(t, "file://"+filepath.ToSlash(dir)+"/", run.OriginalURIBaseIDs["%SRCROOT%"].URI)

	ids := map[string]bool{}
	for _, r := range run.Tool.Driver.Rules {
		assert.False(t, ids[r.ID], "descriptor %s twice", r.ID)
		ids[r.ID] = true
		assert.NotEmpty(t, r.ShortDescription.Text, r.ID)
		assert.True(t, strings.HasPrefix(r.HelpURI, sarif.DocsURL+"#"), r.HelpURI)
	}
	for _, r := range compiler.Rules() {
		if r.ID != "order/<id>" {
			assert.True(t, ids[r.ID], "no descriptor for %s", r.ID)
		}
	}
	assert.False(t, ids["order/<id>"], "order/<id> is a placeholder, not a rule id")

	require.Len(t, run.Results, len(sample(dir)))
	for i, res := range run.Results {
		d := sample(dir)[i]
		desc := run.Tool.Driver.Rules[res.RuleIndex]
		assert.Equal(t, res.RuleID, desc.ID, "ruleIndex of %s", res.RuleID)
		assert.Equal(t, d.Rule, res.RuleID)
		assert.Equal(t, d.Message, res.Message.Text)
		assert.Equal(t, string(d.Severity), res.Level)
	}

	// A relative file is relative to %SRCROOT%, escaped as a URI.
	loc := run.Results[0].Locations[0].PhysicalLocation
	assert.Equal(t, sarif.ArtifactLocation{URI: "p/policy.cue", URIBaseID: "%SRCROOT%"}, loc.ArtifactLocation)
	assert.Equal(t, &sarif.Region{StartLine: 4, StartColumn: 31}, loc.Region)
	rel := run.Results[2].RelatedLocations
	require.Len(t, rel, 1)
	assert.Equal(t, "p/other%20file.cue", rel[0].PhysicalLocation.ArtifactLocation.URI)
	assert.Equal(t, "pii is here", rel[0].Message.Text)
	require.NotNil(t, rel[0].ID)
	assert.Equal(t, 1, *rel[0].ID)

	// The policy's own constraint gets a descriptor at the order/<id> section.
	own := run.Tool.Driver.Rules[run.Results[2].RuleIndex]
	assert.Equal(t, "order/pii-before-audit", own.ID)
	assert.Equal(t, sarif.DocsURL+"#order-id", own.HelpURI)
	assert.Equal(t, "warning", own.DefaultConfiguration.Level)

	// An absolute file is a file: URI; a file without a line has no
	// region; a diagnostic without a file has no location.
	assert.Equal(t, "file://"+filepath.ToSlash(filepath.Join(dir, "abs.cue")), run.Results[3].Locations[0].PhysicalLocation.ArtifactLocation.URI)
	assert.Empty(t, run.Results[3].Locations[0].PhysicalLocation.ArtifactLocation.URIBaseID)
	assert.Nil(t, run.Results[4].Locations[0].PhysicalLocation.Region)
	assert.Empty(t, run.Results[5].Locations)
}

// TestColumns checks that byte columns become code-point columns when the
// file can be read, and stay as they are when it cannot.
func TestColumns(t *testing.T) {
	files := map[string]string{"p.cue": "package p\n\n// café\ntools: \"né\": {url_arg: \"x\"}\n"}
	read := func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	// `{` of line 4 is byte 13 (é is two bytes) and code point 12.
	ds := dsl.Diagnostics{
		{Pos: dsl.Pos{File: "p.cue", Line: 4, Col: 13}, Severity: dsl.Error, Rule: "schema/invalid-value", Message: "m"},
		{Pos: dsl.Pos{File: "p.cue", Line: 4, Col: 3}, Severity: dsl.Error, Rule: "schema/invalid-value", Message: "ascii prefix"},
		{Pos: dsl.Pos{File: "p.cue", Line: 40, Col: 13}, Severity: dsl.Error, Rule: "schema/invalid-value", Message: "past the end"},
		{Pos: dsl.Pos{File: "gone.cue", Line: 4, Col: 13}, Severity: dsl.Error, Rule: "schema/invalid-value", Message: "unreadable"},
	}
	log := sarif.New(ds, sarif.Options{ReadFile: read})
	col := func(i int) int { return log.Runs[0].Results[i].Locations[0].PhysicalLocation.Region.StartColumn }
	assert.Equal(t, 12, col(0))
	assert.Equal(t, 3, col(1))
	assert.Equal(t, 13, col(2))
	assert.Equal(t, 13, col(3))
}

func TestAnchor(t *testing.T) {
	assert.Equal(t, "order-nested-retry", sarif.Anchor("order/nested-retry"))
	assert.Equal(t, "order-id", sarif.Anchor("order/<id>"))
	assert.Equal(t, "cue-syntax", sarif.Anchor("cue/syntax"))
	assert.Equal(t, "schema-unknown-field", sarif.Anchor("schema/unknown-field"))
}

func TestFlow(t *testing.T) {
	assert.Equal(t, "one two three\n\nfour", sarif.Flow("\none\ntwo  three\n\n\nfour\n"))
	assert.Equal(t, "", sarif.Flow(" \n "))
}

// TestSrcRootHoldsFilesAboveIt: vet run in a subdirectory (ci/) on policies
// beside it (../policies/...) writes %SRCROOT% as the directory that holds
// both and every uri below it, never one climbing out of %SRCROOT% with
// "..", which code-scanning tools cannot place in the checkout; the log is
// still valid.
func TestSrcRootHoldsFilesAboveIt(t *testing.T) {
	dir := t.TempDir()
	ci := filepath.Join(dir, "repo", "ci")
	ds := dsl.Diagnostics{
		{Pos: dsl.Pos{File: filepath.FromSlash("../policies/bad/policy.cue"), Line: 4, Col: 2}, Severity: dsl.Error, Rule: "cue/syntax", Message: "here",
			Related: []dsl.Related{{Pos: dsl.Pos{File: filepath.FromSlash("local/policy.cue"), Line: 1, Col: 1}, Message: "and here"}}},
		{Pos: dsl.Pos{File: filepath.FromSlash("./../policies/b c/policy.cue"), Line: 2, Col: 1}, Severity: dsl.Warning, Rule: "cue/syntax", Message: "there"},
	}
	log := sarif.New(ds, sarif.Options{SrcRoot: ci})
	run := log.Runs[0]
	assert.Equal(t, "file://"+filepath.ToSlash(filepath.Join(dir, "repo"))+"/", run.OriginalURIBaseIDs["%SRCROOT%"].URI)
	require.Len(t, run.Results, 2)
	at := func(l sarif.Location) sarif.ArtifactLocation { return l.PhysicalLocation.ArtifactLocation }
	assert.Equal(t, sarif.ArtifactLocation{URI: "policies/bad/policy.cue", URIBaseID: "%SRCROOT%"}, at(run.Results[0].Locations[0]))
	assert.Equal(t, sarif.ArtifactLocation{URI: "ci/local/policy.cue", URIBaseID: "%SRCROOT%"}, at(run.Results[0].RelatedLocations[0]))
	assert.Equal(t, sarif.ArtifactLocation{URI: "policies/b%20c/policy.cue", URIBaseID: "%SRCROOT%"}, at(run.Results[1].Locations[0]))

	var b bytes.Buffer
	require.NoError(t, sarif.Write(&b, ds, sarif.Options{SrcRoot: ci}))
	assert.NoError(t, validate(t, compileSchema(t), b.Bytes()))
}
