// Package initgc turns the garbage collector off while a program's
// packages initialize, unless GOGC is set. agentc's packages and their
// dependencies allocate about 6 MB at init (libphonenumber's metadata, the
// JSON Schema meta-schemas, regular expressions), all of it kept or soon
// dropped by a short process; with the default setting the collector ran
// twice during init, a tenth of the CPU time of an agentc vet. Package
// initialization takes packages in import-path order among those whose
// imports are ready, and this one needs only runtime/debug, so it runs
// part-way through: the first cycle (due at 4 MB) still happens, the
// second no longer does. The command calls Restore (or sets its own
// policy) once main starts.
package initgc

import (
	"os"
	"runtime/debug"
)

// off records whether init turned the collector off.
var off bool

func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(-1)
		off = true
	}
}

// Restore turns the collector back on at the default percentage, if init
// turned it off. A program that runs for long calls it first thing in main.
func Restore() {
	if off {
		debug.SetGCPercent(100)
		off = false
	}
}
