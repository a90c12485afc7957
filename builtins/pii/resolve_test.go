package pii

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestResolveExtendsOverlaps: a detection that starts inside an earlier one and runs past its
// end extends it (its tail is part of an item), one inside it is dropped, and the rest stay.
func TestResolveExtendsOverlaps(t *testing.T) {
	got := resolve([]Match{
		{Kind: KindPhone, Start: 8, End: 20},
		{Kind: KindCard, Start: 0, End: 12},
		{Kind: KindIPv4, Start: 2, End: 6},
		{Kind: KindEmail, Start: 30, End: 40},
	})
	assert.Equal(t, []Match{{Kind: KindCard, Start: 0, End: 20}, {Kind: KindEmail, Start: 30, End: 40}}, got)
}
