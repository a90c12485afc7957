package idempotent

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A nonce left for a key is taken once; nonces older than the claims they
// could name are dropped once there are many.
func TestOwnersAreTakenOnceAndSwept(t *testing.T) {
	var o owners
	a, b := o.take("k"), o.take("k")
	assert.NotEqual(t, a, b, "a new attempt draws a new nonce")
	at := time.Unix(1000, 0)
	o.leave("k", a, at, time.Minute)
	assert.Equal(t, a, o.take("k"), "the next attempt presents the nonce left")
	assert.NotEqual(t, a, o.take("k"), "once")
	for i := range ownersSweep {
		o.leave(fmt.Sprint(i), "n", at, time.Minute)
	}
	o.leave("late", "n", at.Add(2*time.Minute), time.Minute)
	assert.Len(t, o.m, 1, "the old nonces are dropped")
}
