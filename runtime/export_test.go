package runtime

import "time"

// SetMemoryKVClock sets the clock of k.
func SetMemoryKVClock(k *MemoryKV, now func() time.Time) { k.now = now }

// MemoryKVLen returns how many entries k holds, expired ones included.
func MemoryKVLen(k *MemoryKV) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
