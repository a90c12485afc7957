package vet_test

import (
	"testing"

	"github.com/agentc-dev/agentc/internal/docgen/gen"
)

// TestDocsUpToDate fails when a change here leaves the generated pages
// (docs/language.md, docs/rules.md) stale.
func TestDocsUpToDate(t *testing.T) { gen.AssertUpToDate(t, "../..") }
