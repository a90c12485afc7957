package security_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestClassifierFollowsNoRedirectElsewhere: the text of every message goes
// to the classifier's URL; a classifier that redirects to another origin
// does not hand it there, and the call fails as the classifier's failure.
func TestClassifierFollowsNoRedirectElsewhere(t *testing.T) {
	var calls atomic.Int32
	other := classifierServer(t, &calls)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	model, err := completeThrough(t, fmt.Sprintf(`{"classifier":{"url":%q}}`, redirecting.URL), nil, "what is the weather in Lyon?")
	assertBlocked(t, model, err, true, "classifier failed")
	assert.Contains(t, err.Error(), "redirected to another origin")
	assert.Zero(t, calls.Load(), "nothing reached the other origin")
}
