package pii_test

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// pathIDTemplates are URL paths holding a numeric id as a segment of its own, "%" standing
// for the id.
var pathIDTemplates = []string{
	"https://shop.example/orders/%", "https://shop.example/orders/%/items", "GET /api/v1/users/%.json",
	"https://cdn.example/media/%/thumb.png", "/tickets/%?page=2",
}

// TestRandomIDsInURLPaths measures how often a random numeric id of 12 to 19 digits, a
// segment of a URL's path, reads as a card: any such id whose first digits name an issuer
// and whose length is one the issuer uses passes the Luhn check one time in ten, and the
// Maestro ranges (50, 56 to 69, any length from 12 to 19) take every id starting with a 6.
// A card in a path is read at the lengths its network prints (TestCardInAURLPathSegment),
// while an id of another length is not: see docs/detection.md for the figures.
func TestRandomIDsInURLPaths(t *testing.T) {
	const n = 20000
	flagged, six, sixFlagged, _ := randomIDsReadAsCards(t, rand.New(rand.NewPCG(3, 12)), n, pathIDTemplates)
	t.Logf("random path ids read as a card: %d of %d (%.2f%%); of those starting with 6: %d of %d (%.2f%%)",
		flagged, n, 100*float64(flagged)/n, sixFlagged, six, 100*float64(sixFlagged)/float64(six))
	assert.LessOrEqual(t, flagged, n/100, "at most 1% of random path ids read as a card")
	assert.LessOrEqual(t, sixFlagged, six/100, "at most 1% of random path ids starting with a 6")
}

// randomIDsReadAsCards puts n random numeric ids of 12 to 19 digits (the first 1 to 9, the
// length uniform) each in one of templates ("%" standing for the id) and counts those read
// as a card: all of them, those starting with a 6, those read so, and those of each template.
func randomIDsReadAsCards(t *testing.T, r *rand.Rand, n int, templates []string) (flagged, six, sixFlagged int, byTemplate map[string]int) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	byTemplate = map[string]int{}
	for range n {
		length := 12 + r.IntN(8)
		id := strconv.Itoa(1 + r.IntN(9))
		for len(id) < length {
			id += strconv.Itoa(r.IntN(10))
		}
		tpl := templates[r.IntN(len(templates))]
		hit := len(s.Find(strings.Replace(tpl, "%", id, 1))) > 0
		if hit {
			flagged++
			byTemplate[tpl]++
		}
		if id[0] == '6' {
			six++
			if hit {
				sixFlagged++
			}
		}
	}
	return flagged, six, sixFlagged, byTemplate
}
