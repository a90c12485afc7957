package meter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The close of a store's last meter waited for the settlements being
// sent only until each left the resends, before its sender logged and
// counted it lost: the close could return, and the process exit, with
// the loss neither logged nor counted (a close of two stores logged one
// loss of two). The close now waits until each outcome is recorded.
func TestTheCloseWaitsForTheOutcomeToBeRecorded(t *testing.T) {
	t.Run("its send failed", func(t *testing.T) {
		q := &resends{users: 1}
		r := &resend{}
		_, ok := q.add(r)
		require.True(t, ok)
		require.Equal(t, resendStarted, q.start(r))
		pending, drained := q.leave()
		require.Empty(t, pending, "the settlement being sent stays with its sender")
		held, queued := q.end(r, true)
		require.True(t, held)
		require.False(t, queued, "not sent again once the store is closing")
		assert.False(t, isClosed(drained), "its outcome is not recorded yet")
		q.recorded()
		assert.True(t, isClosed(drained))
	})
	t.Run("given up unsent as the close began", func(t *testing.T) {
		q := &resends{users: 1}
		r := &resend{}
		_, ok := q.add(r)
		require.True(t, ok)
		require.True(t, q.drop(r), "it fell due past its deadline with as many others being sent")
		pending, drained := q.leave()
		require.Empty(t, pending)
		assert.False(t, isClosed(drained), "its loss is not recorded yet")
		q.recorded()
		assert.True(t, isClosed(drained))
	})
}
