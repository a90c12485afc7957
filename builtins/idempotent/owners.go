package idempotent

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// owners remembers, per key, the owner nonce of an attempt whose claim went
// unanswered (the store's reply was lost, or the attempt's context ended
// while it waited), until another attempt in this process presents it
// again: if the store had applied the claim, that attempt gets it back
// (runtime.Leaser.AcquireAs) instead of finding it held, and then in doubt,
// although the call never ran. The zero value is ready to use.
type owners struct {
	mu sync.Mutex
	m  map[string]unanswered
}

type unanswered struct {
	owner string
	at    time.Time
}

// ownersSweep is the size from which leaving a nonce first drops those
// older than the claims they could name.
const ownersSweep = 1024

// take returns the nonce left for key, forgetting it, or a new one.
func (o *owners) take(key string) string {
	o.mu.Lock()
	u, ok := o.m[key]
	delete(o.m, key)
	o.mu.Unlock()
	if ok {
		return u.owner
	}
	return strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
}

// leave remembers owner for the next attempt of key; nonces left longer
// ago than life (no claim lives longer) are dropped once there are many.
func (o *owners) leave(key, owner string, now time.Time, life time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]unanswered{}
	}
	if len(o.m) >= ownersSweep {
		for k, u := range o.m {
			if now.Sub(u.at) > life {
				delete(o.m, k)
			}
		}
	}
	o.m[key] = unanswered{owner: owner, at: now}
}
