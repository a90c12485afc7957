package serve_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/serve"
)

// TestRetryAfterIsBoundedToADay: an upstream's 429 may ask for any delay (a
// Retry-After date thousands of years ahead is read as the longest
// duration there is); the gateway relays at most a day, in whole seconds,
// and never a negative or wrapped number.
func TestRetryAfterIsBoundedToADay(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Duration(math.MaxInt64):      "86400",
		time.Duration(math.MaxInt64 - 1):  "86400",
		31 * 365 * 24 * time.Hour:         "86400",
		25 * time.Hour:                    "86400",
		24 * time.Hour:                    "86400",
		90*time.Second + time.Millisecond: "91",
		time.Millisecond:                  "1",
	} {
		h := http.Header{}
		serve.SetRetryAfter(h, d)
		assert.Equal(t, want, h.Get("Retry-After"), "delay %v", d)
	}
	h := http.Header{}
	serve.SetRetryAfter(h, -time.Second)
	assert.Empty(t, h.Values("Retry-After"))
}
