package redact

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
)

// TestItemsOfMergedSpanRunFromTheEarliestMatch: a secret that starts inside
// another and runs past it extends it; the item's match then runs from the
// earlier of the two matches, which for a rule with a "secret" group may be
// the later secret's. An item that started at the first secret would read
// as within the text piece it starts in, when read across a message's
// parts, and the rest of the other secret there would go unmasked.
func TestItemsOfMergedSpanRunFromTheEarliestMatch(t *testing.T) {
	r, err := New(Config{DisableDefaults: true, Patterns: []Pattern{
		{ID: "digits", Regex: `12\d\d`},
		{ID: "tagged", Regex: `ab12(?P<secret>34cd)`},
	}})
	require.NoError(t, err)
	assert.Equal(t, []mask.Item{{From: 3, To: 11, Start: 5, End: 11, With: "[REDACTED:digits]"}}, r.items("xx ab1234cd yy"))
	pieces, _ := mask.Across([]string{"xx ab", "1234cd yy"}, r.items, "")
	assert.Equal(t, []string{"xx ab", "[REDACTED:digits] yy"}, pieces, "the secret read across the pieces is masked whole")
}
