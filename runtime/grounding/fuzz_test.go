package grounding_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentc-dev/agentc/runtime/grounding"
)

// FuzzParse: any text is a checked template or an *Error inside it, never a
// panic, within a second; a checked template renders or fails with an error, within a bound
// on time and output that the template cannot raise.
func FuzzParse(f *testing.F) {
	for _, s := range []string{sources, `{{range .Items}}{{.Contnet}}{{end}}`, `{{define "x"}}{{template "x" .}}{{end}}{{template "x" .}}`,
		`{{with .Items}}{{range .}}{{.Metadata.a.b}}{{end}}{{end}}`, `{{printf "%9999d" 1}}`, `{{range $i, $x := .Items}}{{$x.Score}}{{end}}`,
		`{{range len (printf "%1000s" "")}}{{range len (printf "%1000s" "")}}{{end}}{{end}}`, `{{$a := .Query}}{{$a = print $a $a}}`,
		`{{$a := print .Query .Query}}{{$b := print $a $a}}{{$c := print $b $b}}{{len $c}}`,
		`{{range .Items}}{{range $k, $v := .Metadata}}{{$k}}={{$v}}{{end}}{{end}}`} {
		f.Add(s)
	}
	items := []grounding.Item{{ID: "a", Content: "c", Source: "s", Score: 0.5, Metadata: map[string]any{"a": map[string]any{"b": 1}}}}
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		tpl, err := grounding.Parse(src)
		// A parse, and the search for a parse error's action, reads the
		// template a few times per action.
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%q: parsed in %v", src, d)
		}
		if err != nil {
			var ge *grounding.Error
			if !errors.As(err, &ge) || ge.Offset < 0 || ge.Offset > len(src) {
				t.Fatalf("%q: %v is not an *Error inside the template", src, err)
			}
			return
		}
		start = time.Now()
		out, err := tpl.Render("q", items)
		if err != nil && err.Error() == "" {
			t.Fatalf("%q: an empty error", src)
		}
		if len(out) > grounding.MaxBlockBytes {
			t.Fatalf("%q: %d bytes rendered", src, len(out))
		}
		// A render loops at most once per item and metadata key for each
		// action of the template: one item and a short template take
		// microseconds; a second leaves room for a loaded machine.
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%q: rendered in %v", src, d)
		}
	})
}
