package meter

import "testing"

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
