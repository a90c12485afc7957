package gen

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"

	"github.com/agentc-dev/agentc/conformance"
)

// example is a chain entry using a builtin, quoted from a policy.
type example struct {
	File string // relative to the repository root
	Text string // `chains: STAGE: [` ... `]`
}

// findExamples returns, for each builtin id, the first entry using it in
// the example policies (examples/*/*.cue, test files left out), else in a
// conformance case whose policy vets clean.
func findExamples(root string) (map[string]*example, error) {
	out := map[string]*example{}
	files, err := filepath.Glob(filepath.Join(root, "examples", "*", "*.cue"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.cue") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, name)
		collectExamples(filepath.ToSlash(rel), src, out)
	}
	cases, err := conformance.Load(filepath.Join(root, "conformance", "testdata"))
	if err != nil {
		return nil, err
	}
	for _, c := range cases {
		// A run case, or a case that vets clean and proves clean (or pins
		// nothing about prove).
		clean := len(c.WantVet) == 0 && len(c.WantProve) == 0
		if !clean {
			continue
		}
		for _, f := range c.Archive.Files {
			if strings.HasPrefix(f.Name, "policy/") && strings.HasSuffix(f.Name, ".cue") {
				collectExamples("conformance/testdata/"+c.Name+".txtar", f.Data, out)
			}
		}
	}
	return out, nil
}

// collectExamples adds the chain entries of one file for ids not yet
// exemplified.
func collectExamples(file string, src []byte, out map[string]*example) {
	f, err := parser.ParseFile(file, src, parser.ParseComments)
	if err != nil {
		return
	}
	ast.Walk(f, func(n ast.Node) bool {
		fd, ok := n.(*ast.Field)
		if !ok {
			return true
		}
		stage, ok := labelName(fd.Label)
		if !ok || (stage != "chat" && stage != "tool" && stage != "turn") {
			return true
		}
		list, ok := unparen(fd.Value).(*ast.ListLit)
		if !ok {
			return true
		}
		for _, el := range list.Elts {
			st, ok := el.(*ast.StructLit)
			if !ok {
				continue
			}
			use := useOf(st)
			if use == "" || out[use] != nil {
				continue
			}
			b, err := format.Node(st, format.Simplify())
			if err != nil {
				continue
			}
			body := strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n\t")
			out[use] = &example{File: file, Text: "chains: " + stage + ": [\n\t" + body + ",\n]"}
		}
		return false
	}, nil)
}

func useOf(st *ast.StructLit) string {
	for _, d := range st.Elts {
		f, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		if n, ok := labelName(f.Label); ok && n == "use" {
			if lit, ok := f.Value.(*ast.BasicLit); ok {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					return s
				}
			}
		}
	}
	return ""
}
