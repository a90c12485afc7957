package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model in a plan states its prices: one without them is refused rather
// than loaded as free, which a meter's usd budget would count as nothing.
func TestDecodeRefusesAModelWithoutPrices(t *testing.T) {
	for in, want := range map[string]string{
		`{"provider":"openai","model":"gpt-4o"}`: "missing properties: 'usd_per_mtok_in', 'usd_per_mtok_out'",
		`{"usd_per_mtok_in":3}`:                  "missing properties: 'usd_per_mtok_out'",
		`{"usd_per_mtok_out":15}`:                "missing properties: 'usd_per_mtok_in'",
	} {
		_, err := Decode("plan.json", []byte(`{"version":1,"policy":"p","chains":{},"models":{"m":`+in+`}}`))
		require.Error(t, err, in)
		assert.ErrorContains(t, err, "/models/m", in)
		assert.ErrorContains(t, err, want, in)
	}
}
