package dsl

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/jsonpointer"
)

// checkArgsSchema compiles a tool's argument schema as JSON Schema (draft
// 2020-12 unless it names another with $schema) and reports each keyword
// that is not valid JSON Schema at the keyword, as schema/invalid-value. A
// schema read from a file is reported at the file's name, with the
// keyword's JSON pointer.
func (l *loader) checkArgsSchema(t *Tool, fromFile bool) {
	l.checkToolSchema(t.Name, "args", t.Args, t.ArgsPos, fromFile)
}

// checkToolSchema checks the JSON Schema raw of the tool's field (args,
// result_schema) as checkArgsSchema describes.
func (l *loader) checkToolSchema(tool, field string, raw []byte, at Pos, fromFile bool) {
	l.checkSchema([]string{"tools", tool, field}, raw, at, fromFile)
}

// checkSchema checks the JSON Schema raw written at path (tools.x.args,
// state.fields.x.schema) as checkArgsSchema describes.
func (l *loader) checkSchema(path []string, raw []byte, at Pos, fromFile bool) {
	if len(raw) == 0 {
		return
	}
	name, field := strings.Join(path, "."), path[len(path)-1]
	c := jsonschema.NewCompiler()
	url := "agentc:///" + field + ".json"
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		l.errorf(at, "schema/invalid-value", "%s: not a JSON Schema: %v", name, err)
		return
	}
	_, err := c.Compile(url)
	if err == nil {
		return
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		msg := strings.ReplaceAll(err.Error(), url, field)
		l.errorf(at, "schema/invalid-value", "%s: %s", name, strings.TrimPrefix(msg, "jsonschema: "))
		return
	}
	for _, f := range schemaFaults(ve) {
		pos := at
		if !fromFile {
			pos = l.userPos(append(slices.Clone(path), jsonpointer.Tokens(f.at)...))
		}
		where := name
		if f.at != "" {
			where += strings.ReplaceAll(f.at, "/", ".")
		}
		l.errorf(pos, "schema/invalid-value", "%s: not valid JSON Schema: %s", where, f.msg)
	}
}

// schemaFault is one keyword of a schema that its metaschema refuses.
type schemaFault struct{ at, msg string }

// schemaFaults returns the deepest failures of a metaschema validation,
// the first one for each keyword location of the user's schema, sorted.
func schemaFaults(ve *jsonschema.ValidationError) []schemaFault {
	seen := map[string]bool{}
	var out []schemaFault
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if !seen[e.InstanceLocation] {
				seen[e.InstanceLocation] = true
				out = append(out, schemaFault{e.InstanceLocation, e.Message})
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// checkArgRefs reports a url_arg or path_arg that names no property of the
// tool's argument schema: egress and file_check would find no argument to
// check, and block every call of the tool.
func (l *loader) checkArgRefs(t *Tool) {
	for _, ref := range []struct {
		field, arg string
		pos        Pos
	}{{"url_arg", t.URLArg, t.URLArgPos}, {"path_arg", t.PathArg, t.PathArgPos}} {
		if ref.arg == "" {
			continue
		}
		has, known := t.HasArg(ref.arg)
		if !known || has {
			continue
		}
		l.errorf(ref.pos, "schema/bad-reference", "tools.%s.%s: %q is not a property of the tool's args schema%s", t.Name, ref.field, ref.arg, suggestName(ref.arg, argNames(t)))
	}
}

// argNames returns the top-level properties of a tool's argument schema.
func argNames(t *Tool) []string {
	var s struct {
		Properties map[string]any `json:"properties"`
	}
	_ = json.Unmarshal(t.Args, &s)
	return keys(s.Properties)
}
