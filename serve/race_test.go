//go:build race

package serve

// raceEnabled is set when the race detector runs, whose allocations are
// not the program's.
const raceEnabled = true
