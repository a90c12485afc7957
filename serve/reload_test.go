package serve

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A change is reloaded once its stamps have stood still for a check: a
// file seen mid-write (its stamps move again) is not loaded half done.
func TestChangeIsDueOnceItStandsStill(t *testing.T) {
	at := func(size int64, sec int) fingerprint {
		return fingerprint{files: map[string]fileStamp{"policy.cue": {size: size, mod: time.Unix(int64(sec), 0), ok: true}}}
	}
	loaded := at(10, 1)
	var w settle
	assert.Nil(t, w.due(loaded, loaded), "nothing changed")
	assert.Nil(t, w.due(loaded, at(4, 2)), "first seen: the write may go on")
	assert.Nil(t, w.due(loaded, at(12, 3)), "it moved again")
	assert.Equal(t, []string{"policy.cue"}, w.due(loaded, at(12, 3)), "it stood still: due")
	assert.Nil(t, w.due(loaded, loaded), "back as loaded: nothing due")
	assert.Nil(t, w.due(loaded, at(12, 4)))
	assert.Nil(t, w.due(loaded, loaded), "a change undone before it settled is forgotten")
	assert.Nil(t, w.due(loaded, at(12, 4)), "seen anew: not due yet")
}
