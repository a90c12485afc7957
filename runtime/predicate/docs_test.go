package predicate_test

import (
	"testing"

	"github.com/agentc-dev/agentc/internal/docgen/gen"
)

// TestDocsUpToDate fails when a change to the stages' variables leaves the
// generated language reference (docs/language.md) stale.
func TestDocsUpToDate(t *testing.T) {
	stale, err := gen.Stale("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		t.Errorf("%s is stale: run %s", p, gen.Command)
	}
}
