//go:build !linux

package cputime

import "time"

// threadTime reports that there is no thread clock to read.
func threadTime() (time.Duration, bool) { return 0, false }
