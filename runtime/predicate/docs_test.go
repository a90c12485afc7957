package predicate_test

import (
	"testing"

	"github.com/agentc-dev/agentc/internal/docgen/gen"
)

// TestDocsUpToDate fails when a change to the stages' variables leaves the
// generated language reference (docs/language.md) stale.
func TestDocsUpToDate(t *testing.T) { gen.AssertUpToDate(t, "../..") }
