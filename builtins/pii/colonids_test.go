package pii_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// colonIDTemplates are texts holding numbers joined by colons, "%" standing for a number of
// 12 to 19 digits: a Kafka record's topic, partition and offset, a partition and an offset, a
// time and a sequence number, a stream's entry, a list's item, a ratio.
var colonIDTemplates = []string{
	"orders:3:%", "consumed orders:17:% ok", "partition 3:%", "at 12:30:45:%", "entry 7:% acked",
	"1.2:%", "%:3:4", "seq 0:%:1", "%:0", "shard 12:% lag 4",
}

// TestRandomIDsAfterColons measures how often random numbers of 12 to 19 digits joined by
// colons to other numbers (colonIDTemplates) read as a card: a number that starts as a card
// does and has a length its network issues passes the Luhn check one time in ten, and the
// Maestro ranges (50, 56 to 69, any length from 12 to 19) take every number starting with a
// 6. A card after a number and a colon is found (TestCardAfterANumberAndAColon); an offset,
// a sequence number or an id of another length is not: see docs/detection.md for the
// figures.
func TestRandomIDsAfterColons(t *testing.T) {
	const n = 20000
	flagged, six, sixFlagged, byTemplate := randomIDsReadAsCards(t, rand.New(rand.NewPCG(5, 17)), n, colonIDTemplates)
	t.Logf("random numbers after colons read as a card: %d of %d (%.2f%%); of those starting with 6: %d of %d (%.2f%%)",
		flagged, n, 100*float64(flagged)/n, sixFlagged, six, 100*float64(sixFlagged)/float64(six))
	for _, tpl := range colonIDTemplates {
		t.Logf("%-26q %d", tpl, byTemplate[tpl])
	}
	assert.LessOrEqual(t, flagged, n/100, "at most 1% of random numbers after colons read as a card")
	assert.LessOrEqual(t, sixFlagged, six/100, "at most 1% of those starting with a 6")
}
