package plan

import (
	"errors"
	"os"
	"testing"
)

// FuzzDecode: any text given as a plan decodes or is refused with an
// *Error listing at least one problem, never a panic; a plan it accepts
// encodes to text it accepts again, unchanged.
func FuzzDecode(f *testing.F) {
	for _, file := range []string{"../../examples/service/plan.json", "../../examples/service/replicated/plan.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"version":1,"policy":"p","chains":{}}`,
		`{"version":2,"policy":"p","chains":{}}`,
		`{"version":1,"policy":"p","chains":{"tool":[{"use":"guard","config":{"deny":"true"},"predicates":{"deny":{"stage":"tool","source":"true"}}}]}}`,
		`{"version":1,"policy":"p","tools":{"a":{"side_effecting":true,"retry_safe":false}},"chains":{"tool":[{"use":"log","tools":["a"],"when":{"stage":"tool","source":"true","tools":["a"]}}]},"invariants":{"max_executions":{"a":1}}}`,
		`{"version":1,"policy":"p","chains":{"chat":[{"use":"tracing","config":{"attributes":{"env":"a","Env":"b"}}}]}}`,
		`{"version":1,"policy":"p","chains":{},"models":{"m":{"usd_per_mtok_in":1e400,"usd_per_mtok_out":1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode("fuzz.json", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %v (%T) is not an *Error with problems", err, err)
			}
			return
		}
		b, err := Encode(p)
		if err != nil {
			t.Fatalf("encode an accepted plan: %v", err)
		}
		again, err := Decode("again.json", b)
		if err != nil {
			t.Fatalf("the encoding of an accepted plan is refused: %v\n%s", err, b)
		}
		b2, err := Encode(again)
		if err != nil || string(b2) != string(b) {
			t.Fatalf("the plan changed on a second decode:\n%s\n%s", b, b2)
		}
	})
}
