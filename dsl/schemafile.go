package dsl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
)

// schemaFile is a JSON Schema file a policy names, kept so that a fault
// found in the schema is placed at its line in the file.
type schemaFile struct {
	// path is the field that names the file (tools.x.args) and ref its
	// position in the policy.
	path []string
	ref  Pos
	// name is the file as the policy's files are named (under the policy
	// directory) and data its text.
	name string
	data []byte
	// offsets holds the offset of each value by its JSON pointer, walked
	// at the first need.
	offsets map[string]int64
}

// at returns the position of the byte at off.
func (f *schemaFile) at(off int64) Pos {
	line, col := jsonwalk.Position(f.data, off)
	return Pos{File: f.name, Line: line, Col: col}
}

// pos returns the position of the value at tokens within the file, or of
// its closest ancestor that the file holds.
func (f *schemaFile) pos(tokens []string) Pos {
	if f.offsets == nil {
		f.offsets = map[string]int64{}
		w := jsonwalk.Walker{Value: func(ptr []byte, start int64) bool {
			if _, ok := f.offsets[string(ptr)]; !ok {
				f.offsets[string(ptr)] = start
			}
			return true
		}}
		_ = w.Walk(f.data)
	}
	for n := len(tokens); n >= 0; n-- {
		var b strings.Builder
		for _, t := range tokens[:n] {
			b.WriteString("/" + jsonpointer.Escape(t))
		}
		if off, ok := f.offsets[b.String()]; ok {
			return f.at(off)
		}
	}
	return f.at(0)
}

// readSchemaJSON reads the JSON Schema file rel that the field at path
// names at pos and keeps it for placing faults. A file that is not JSON,
// holds JSON that is not an object, or repeats a key of an object
// (encoding/json keeps the last, so a constraint written with the first
// would be dropped unseen), is reported in the file and nil returned.
func (l *loader) readSchemaJSON(path []string, rel string, pos Pos) []byte {
	b, err := l.readSchemaFile(rel)
	if err != nil {
		l.errorf(pos, "schema/bad-reference", "cannot read JSON Schema file %q: %v", rel, err)
		return nil
	}
	f := &schemaFile{path: slices.Clone(path), ref: pos, name: filepath.Join(l.dir, rel), data: b}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		off, problem := jsonSyntaxProblem(b, err)
		l.diags = append(l.diags, Diagnostic{Pos: f.at(off), Severity: Error, Rule: "schema/invalid-value",
			Message: fmt.Sprintf("JSON Schema file %q is not valid JSON%s", rel, problem), Related: namedHere(pos)})
		return nil
	}
	if _, ok := doc.(map[string]any); !ok {
		start := len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
		l.diags = append(l.diags, Diagnostic{Pos: f.at(int64(start)), Severity: Error, Rule: "schema/invalid-value",
			Message: fmt.Sprintf("JSON Schema file %q must hold a JSON object", rel), Related: namedHere(pos)})
		return nil
	}
	repeated := false
	w := jsonwalk.Walker{Repeat: func(_ []byte, key string, start, _ int64) bool {
		l.diags = append(l.diags, Diagnostic{Pos: f.at(start), Severity: Error, Rule: "schema/invalid-value",
			Message: fmt.Sprintf("%s: JSON Schema file %q: key %q repeats a key of the same object (only the last would count)", fieldName(path), rel, key),
			Related: namedHere(pos)})
		repeated = true
		return false
	}}
	if _ = w.Walk(b); repeated {
		return nil
	}
	l.schemaFiles = append(l.schemaFiles, f)
	return b
}

// namedHere is the note of a diagnostic placed in a JSON Schema file that
// gives the place the policy names the file.
func namedHere(ref Pos) []Related {
	return []Related{{Pos: ref, Message: "the policy names the file here"}}
}

// schemaFileOf returns the file that the field at the start of where names
// at ref, if one does.
func (l *loader) schemaFileOf(where []string, ref Pos) *schemaFile {
	for _, f := range l.schemaFiles {
		if f.ref == ref && len(where) >= len(f.path) && slices.Equal(where[:len(f.path)], f.path) {
			return f
		}
	}
	return nil
}

// schemaReport reports a fault of a JSON Schema at where, a path into the
// schema of a field written at at: placed at the value in the file the
// field names (with a note of at) when fromFile, else at pos.
func (l *loader) schemaReport(sev Severity, where []string, pos, at Pos, fromFile bool, rule, format string, args ...any) {
	var related []Related
	if fromFile {
		pos = at
		if f := l.schemaFileOf(where, at); f != nil {
			pos, related = f.pos(where[len(f.path):]), namedHere(at)
		}
	}
	l.diags = append(l.diags, Diagnostic{Pos: pos, Severity: sev, Rule: rule, Message: fmt.Sprintf(format, args...), Related: related})
}
