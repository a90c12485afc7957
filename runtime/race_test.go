//go:build race

package runtime_test

// raceEnabled is set when the race detector runs; it makes sync.Pool drop
// items, so allocation counts are not meaningful.
const raceEnabled = true
