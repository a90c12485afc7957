package wire_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/internal/wire"
)

// TestRetryAfterBeyondADayIsADay: a delay too long to hold in a Duration,
// or longer than anyone waits, is the longest delay (a day), never no delay,
// which a retry layer would read as "try again at once".
func TestRetryAfterBeyondADayIsADay(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		header, value string
		want          time.Duration
	}{
		{"Retry-After", "99999999999999999999", wire.MaxRetryAfter},
		{"Retry-After", "1000000000", wire.MaxRetryAfter},
		{"Retry-After", "1e400", wire.MaxRetryAfter},
		{"Retry-After", "1e-400", 0},
		{"Retry-After", "86401", wire.MaxRetryAfter},
		{"Retry-After", "86400", 24 * time.Hour},
		{"Retry-After", "+Inf", wire.MaxRetryAfter},
		{"Retry-After", "30", 30 * time.Second},
		{"Retry-After", "0", 0},
		{"Retry-After", "-5", 0},
		{"Retry-After", "NaN", 0},
		{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT", wire.MaxRetryAfter},
		{"Retry-After", now.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{"Retry-After", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"Retry-After-Ms", "1e15", wire.MaxRetryAfter},
		{"Retry-After-Ms", "1500", 1500 * time.Millisecond},
	} {
		h := http.Header{}
		h.Set(tc.header, tc.value)
		assert.Equal(t, tc.want, wire.RetryAfter(h, now), "%s: %s", tc.header, tc.value)
	}
}
