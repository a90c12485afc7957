package prove

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime/scenario"
)

// A run and its image with the concurrent copies swapped end in one state:
// the outcome of the concurrent step (that of its first copy that failed)
// does not tell them apart.
func TestFingerprintOfSwappedCopies(t *testing.T) {
	failed := func(kind string) scenario.StepResult {
		return scenario.StepResult{Stage: "tool", Outcome: "error", Attempts: 1, Error: &scenario.ErrorSummary{Kind: kind}}
	}
	transient, timeout := failed("transient"), failed("timeout")
	run := func(copies ...scenario.StepResult) *outcome {
		sr := scenario.StepResult{Stage: "parallel", Outcome: "ok", Nested: copies}
		for _, c := range copies {
			if c.Outcome != "ok" {
				sr.Outcome, sr.Error = c.Outcome, c.Error
				break
			}
		}
		events := []event{{Step: "0/0", Kind: evExecute}, {Step: "0/1", Kind: evExecute}}
		return &outcome{res: &scenario.Result{Steps: []scenario.StepResult{sr}}, events: events}
	}
	a, b := run(transient, timeout), run(timeout, transient)
	assert.Equal(t, a.fingerprint(), b.fingerprint())
	assert.NotEqual(t, a.fingerprint(), run(transient, transient).fingerprint())
}
