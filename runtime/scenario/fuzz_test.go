package scenario_test

import (
	"testing"

	"github.com/agentc-dev/agentc/runtime/scenario"
)

// FuzzParse: any bytes as a scenario decode or fail with an error, never a
// panic; a decoded scenario has a step list.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"steps": [{"chat": {"model": "primary", "messages": [{"role": "user", "content": "hi"}]}}]}`,
		`{"models": {"primary": [{"deltas": ["a", "b"], "usage": {"input_tokens": 3}}, {"error": "transient"}]}, "steps": []}`,
		`{"models": {"m": [{"tool_calls": [{"name": "refund", "args": {"order_id": "A1"}}], "finish_reason": "tool_calls"}]}, "steps": [{"tool": {"name": "refund", "args": {}}}]}`,
		`{"dns": {"api.example.com": ["93.184.216.34"]}, "steps": []}`,
		`{"steps": [{"chat": {}}`, `[]`, `null`, `{"steps": null}`, `{"steps": [{"delay_ms": -1}]}`,
		"\xff", `{"steps": [{"tool": {"name": "t", "args": {"n": 1e999}}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := scenario.Parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", data)
			}
			return
		}
		if s == nil {
			t.Fatalf("nil scenario and nil error for %q", data)
		}
	})
}
