package meter

import (
	"testing"
	"time"
)

// MaxResending is maxResending, for the tests.
const MaxResending = maxResending

// SetMaxResends sets maxResends to n until the test ends.
func SetMaxResends(t testing.TB, n int) {
	old := maxResends
	maxResends = n
	t.Cleanup(func() { maxResends = old })
}

// Waiting returns how many settlements of m's ledger store wait to be
// sent again, or are being sent.
func Waiting(m *Meter) int {
	m.resends.mu.Lock()
	defer m.resends.mu.Unlock()
	return len(m.resends.pending)
}

// SetCleanupTimeout sets cleanupSettleTimeout to d until the test ends.
func SetCleanupTimeout(t testing.TB, d time.Duration) {
	old := cleanupSettleTimeout
	cleanupSettleTimeout = d
	t.Cleanup(func() { cleanupSettleTimeout = old })
}

// OnCleanupWait makes the Cleanup of a store's last meter call f as it
// starts to wait for the settlements being sent, until the test ends.
func OnCleanupWait(t testing.TB, f func()) {
	old := cleanupWaits
	cleanupWaits = f
	t.Cleanup(func() { cleanupWaits = old })
}
