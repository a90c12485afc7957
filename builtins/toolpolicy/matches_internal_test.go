package toolpolicy

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMatchesNumberTooLongToWrite: a number whose plain decimal form would
// be too long to match cannot be checked (an error, so the call is
// refused), at the top and nested.
func TestMatchesNumberTooLongToWrite(t *testing.T) {
	re := regexp.MustCompile(`^[0-9]{10,}$`)
	for _, v := range []any{json.Number("1e999999999"), []any{json.Number("-1e-999999999")}} {
		_, err := matches(re, v)
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "too long")
	}
	hit, err := matches(re, json.Number("1e400"))
	require.NoError(t, err)
	assert.True(t, hit, "1e400 is written as 1 and 400 zeros")
}
