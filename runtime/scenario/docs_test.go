package scenario_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// TestDocsListEveryField fails when docs/scenarios.md leaves out a field
// the scenario decoder accepts or the result carries: the page is the
// format's reference.
func TestDocsListEveryField(t *testing.T) {
	b, err := os.ReadFile("../../docs/scenarios.md")
	require.NoError(t, err)
	doc := string(b)
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			// A field is documented as `name` or inside a list of the
			// fields of an object ("name").
			assert.True(t, strings.Contains(doc, "`"+name+"`") || strings.Contains(doc, `"`+name+`"`),
				"docs/scenarios.md does not mention %s.%s", path, name)
			walk(f.Type, path+"."+name)
		}
	}
	walk(reflect.TypeFor[scenario.Scenario](), "scenario")
	walk(reflect.TypeFor[scenario.Result](), "result")
	walk(reflect.TypeFor[runtime.ChatRequest](), "request")
}
