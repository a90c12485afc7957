package dsl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fuzzPolicy returns the schema a fuzz target loads with, and the
// directory and the path of the policy file it writes each input to.
func fuzzPolicy(f *testing.F) (*Schema, string, string) {
	schema, err := DefaultSchema()
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	return schema, dir, filepath.Join(dir, "p.cue")
}

// FuzzLoad: any text as a policy file ends in a policy or in diagnostics
// positioned in that file (or unpositioned), never in a panic or an error
// (errors are for paths that cannot be used).
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"package p\n\nchains: chat: [{use: \"retry\", max_attempts: 3}]\n",
		"package p\n\nchains: chat: [{use: \"retyr\"}]\n",
		"package p\n\ntools: refund: {side_effecting: true, args: {type: \"object\", properties: order_id: type: \"string\"}}\nchains: tool: [{use: \"guard\", deny: \"args.ammount > 1\"}]\n",
		"package p\n\nchains: chat: [{use: \"retry\"",
		"package p\n\nx: a: b: c: d: 1\n",
		"package p\n\nimport \"list\"\n\nx: list.Range(0, 10, 1)\n",
		"package p\n\nstores: s: {kind: \"redis\"}\n",
		"\xff\xfe",
		"package p\n\nchains: tool: [{use: \"egress\", allow: [\"*\"]}, {use: \"egress\", allow: [\"*\"]}]\n",
	} {
		f.Add(s)
	}
	schema, dir, path := fuzzPolicy(f)
	f.Fuzz(func(t *testing.T, src string) {
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		p, diags, err := Load(context.Background(), []string{dir}, Options{Schema: schema, Timeout: 2 * time.Second})
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("internal error for %q: %v", src, err)
			}
			return
		}
		if p == nil && len(diags) == 0 {
			t.Fatalf("no policy and no diagnostics for %q", src)
		}
		for _, d := range diags {
			if d.Pos.File != "" && d.Pos.File != path && filepath.Base(d.Pos.File) != "p.cue" {
				t.Fatalf("diagnostic outside the policy for %q: %v", src, d)
			}
			if d.Pos.Line < 0 || d.Pos.Col < 0 || d.Rule == "" || d.Message == "" {
				t.Fatalf("malformed diagnostic for %q: %+v", src, d)
			}
		}
	})
}
