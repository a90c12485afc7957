package meter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A window of 168h starts each Thursday at 00:00 UTC, as the doc says: the
// spans are counted from the Unix epoch, a Thursday. A leap day falls in
// February's month window.
func TestWindowStarts(t *testing.T) {
	week, err := parseWindow("168h")
	require.NoError(t, err)
	for _, at := range []time.Time{time.Date(2031, 3, 10, 12, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)} {
		start, end := week.at(at)
		assert.Equal(t, time.Thursday, start.Weekday(), at)
		assert.Equal(t, time.Duration(0), start.Sub(start.Truncate(24*time.Hour)), at)
		assert.True(t, !at.Before(start) && at.Before(end), at)
	}
	month, err := parseWindow("month")
	require.NoError(t, err)
	start, end := month.at(time.Date(2032, 2, 29, 23, 59, 59, 0, time.FixedZone("east", 5*3600)))
	assert.Equal(t, time.Date(2032, 2, 1, 0, 0, 0, 0, time.UTC), start, "18:59:59 UTC on the leap day")
	assert.Equal(t, time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC), end)
	start, _ = month.at(time.Date(2032, 3, 1, 3, 0, 0, 0, time.FixedZone("east", 5*3600)))
	assert.Equal(t, time.Date(2032, 2, 1, 0, 0, 0, 0, time.UTC), start, "22:00 UTC on the leap day, though March 1 where it was read")
}
