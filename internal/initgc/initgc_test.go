package initgc

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestOffUntilRestore(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: init leaves the collector alone")
	}
	// SetGCPercent returns the previous setting.
	if prev := debug.SetGCPercent(-1); prev != -1 {
		t.Fatalf("after init the collector is at %d%%, want off (-1)", prev)
	}
	Restore()
	if prev := debug.SetGCPercent(100); prev != 100 {
		t.Fatalf("after Restore the collector is at %d%%, want 100", prev)
	}
	debug.SetGCPercent(50)
	Restore() // a second Restore is a no-op
	if prev := debug.SetGCPercent(100); prev != 50 {
		t.Fatalf("a second Restore changed the setting to %d%%", prev)
	}
}
