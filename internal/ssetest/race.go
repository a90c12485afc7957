//go:build race

package ssetest

// RaceEnabled is set when the race detector runs: it makes sync.Pool drop
// items, so allocation counts are not meaningful.
const RaceEnabled = true
