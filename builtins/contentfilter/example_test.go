package contentfilter_test

import (
	"fmt"

	"github.com/agentc-dev/agentc/builtins/contentfilter"
)

func ExampleFilter_Check() {
	f, err := contentfilter.New(contentfilter.Config{
		Keywords: []string{"project falcon"},
		Patterns: []string{`(?i)\binternal[-_ ]only\b`},
	})
	if err != nil {
		panic(err)
	}
	for _, text := range []string{"Status of Project  Falcon?", "this is INTERNAL-ONLY", "falconry"} {
		m, ok := f.Check(text)
		fmt.Println(ok, m.Kind, m.Rule)
	}
	// Output:
	// true keyword project falcon
	// true pattern (?i)\binternal[-_ ]only\b
	// false
}
