// Package initgc turns the garbage collector off while a program's
// packages initialize, unless GOGC is set. agentc's packages and their
// dependencies allocate about 6 MB at init (libphonenumber's metadata, the
// JSON Schema meta-schemas, regular expressions), all of it kept or soon
// dropped by a short process; with the default setting the collector ran
// during init, a tenth of the CPU time of an agentc vet.
//
// Package initialization takes packages in import-path order among those
// whose imports are ready. runtime/debug sorts after nearly every
// third-party path, so a package importing it ran after libphonenumber,
// when the first cycle (due at 4 MB) had already started. This package
// therefore reaches the runtime's setting through the symbol runtime/debug
// itself links to (runtime/debug.setGCPercent, which the runtime provides)
// and imports only os: it runs once os has, before the third-party
// packages whose paths sort after its own. The command calls Restore (or
// sets its own policy) once main starts.
package initgc

import (
	"os"
	_ "unsafe" // go:linkname
)

// setGCPercent is debug.SetGCPercent without the import of runtime/debug.
//
//go:linkname setGCPercent runtime/debug.setGCPercent
func setGCPercent(int32) int32

// off records whether init turned the collector off.
var off bool

func init() {
	if os.Getenv("GOGC") == "" {
		setGCPercent(-1)
		off = true
	}
}

// Restore turns the collector back on at the default percentage, if init
// turned it off. A program that runs for long calls it first thing in main.
func Restore() {
	if off {
		setGCPercent(100)
		off = false
	}
}
