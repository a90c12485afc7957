package grounding_test

import (
	"errors"
	"testing"

	"github.com/agentc-dev/agentc/runtime/grounding"
)

// FuzzParse: any text is a checked template or an *Error inside it, never a
// panic; a checked template renders or fails with an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{sources, `{{range .Items}}{{.Contnet}}{{end}}`, `{{define "x"}}{{template "x" .}}{{end}}{{template "x" .}}`,
		`{{with .Items}}{{range .}}{{.Metadata.a.b}}{{end}}{{end}}`, `{{printf "%9999d" 1}}`, `{{range $i, $x := .Items}}{{$x.Score}}{{end}}`} {
		f.Add(s)
	}
	items := []grounding.Item{{ID: "a", Content: "c", Source: "s", Score: 0.5, Metadata: map[string]any{"a": map[string]any{"b": 1}}}}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := grounding.Parse(src)
		if err != nil {
			var ge *grounding.Error
			if !errors.As(err, &ge) || ge.Offset < 0 || ge.Offset > len(src) {
				t.Fatalf("%q: %v is not an *Error inside the template", src, err)
			}
			return
		}
		if _, err := tpl.Render("q", items); err != nil && err.Error() == "" {
			t.Fatalf("%q: an empty error", src)
		}
	})
}
