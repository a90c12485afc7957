package serve

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// StatusClientClosedRequest is the status logged for a client that went
// away before its answer (nginx's 499); nobody reads it.
const StatusClientClosedRequest = 499

// StatusOf maps the error of a call to an HTTP status and the delay to send
// in Retry-After (0: none). Final errors are 4xx, so a client does not
// retry them: blocked 403, budget 402, in doubt 409 (a side-effecting call
// whose earlier attempt may have run: a person or a reconciliation decides).
// A rate limit is 429 (with its delay, else DefaultRetryAfter), an open
// circuit breaker 503 (with the delay when one is known), a layer's store that
// failed or did not answer within its `timeout` 503 with StoreRetryAfter
// (runtime.ErrStoreUnavailable: the gateway's state, not the model,
// failed), or 500 without a delay when the store refused as it will again
// (storeRefused), a call refused or cut by the shutdown 503 with one
// second, an upstream timeout 504 and any other failure 502.
func StatusOf(err error) (int, time.Duration) {
	switch runtime.Classify(err) {
	case runtime.ClassBlocked:
		return http.StatusForbidden, 0
	case runtime.ClassBudget:
		return http.StatusPaymentRequired, 0
	case runtime.ClassInDoubt:
		return http.StatusConflict, 0
	}
	var bo *runtime.BreakerOpenError
	if errors.As(err, &bo) {
		return http.StatusServiceUnavailable, max(time.Until(bo.Until), time.Second)
	}
	if storeRefused(err) {
		return http.StatusInternalServerError, 0
	}
	if errors.Is(err, runtime.ErrStoreUnavailable) {
		return http.StatusServiceUnavailable, StoreRetryAfter
	}
	var sd *shuttingDown
	if errors.As(err, &sd) {
		// Another replica, or this one restarted, takes the retry.
		return http.StatusServiceUnavailable, time.Second
	}
	switch runtime.KindOf(err) {
	case string(runtime.KindRateLimited):
		d, _ := runtime.RetryAfterOf(err)
		if d <= 0 {
			// An upstream's 429 that named no delay: a client retrying
			// at once would be refused again.
			d = DefaultRetryAfter
		}
		return http.StatusTooManyRequests, d
	case string(runtime.KindTimeout):
		return http.StatusGatewayTimeout, 0
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout, 0
	}
	if invalidUpstream(err) {
		return http.StatusBadRequest, 0
	}
	return http.StatusBadGateway, 0
}

// errorCode names the error of a call in an error body's code: its kind
// (runtime.KindOf), or unavailable for a call the shutdown refused or cut,
// or store_refused for a layer's store that refused as it will again
// (storeRefused).
func errorCode(err error) string {
	var sd *shuttingDown
	if errors.As(err, &sd) {
		return string(errUnavailable)
	}
	if storeRefused(err) {
		return string(errStoreRefused)
	}
	return runtime.KindOf(err)
}

// storeRefused reports whether err is a call a layer refused because its
// store failed (runtime.ErrStoreUnavailable) with the server's answer that
// asking again fails the same way (runtime.PermanentStoreError: its tables
// gone, a privilege or the credentials refused): no outage a retry waits
// out, but the gateway's state to mend. Classify decides first: a call
// in doubt, blocked or over budget is answered as such.
func storeRefused(err error) bool {
	if runtime.Classify(err) != runtime.ClassFailure || runtime.KindOf(err) != string(runtime.KindStoreUnavailable) {
		return false
	}
	var se *runtime.StoreError
	return errors.As(err, &se) && se.NotRun && runtime.PermanentStoreError(se.Err)
}

// DefaultRetryAfter is the Retry-After of a 429 whose cause named no delay
// (an upstream's 429 without retry-after): every 429 carries one.
const DefaultRetryAfter = time.Second

// StoreRetryAfter is the Retry-After of a call refused because a layer's
// store did not answer: the store's own outage has no known end.
const StoreRetryAfter = time.Second

// invalidUpstream reports an upstream's permanent refusal of the request
// itself (400, 413, 422: a context too long, a parameter the model does
// not take): the caller's request is what fails, so the caller gets a 400
// its SDK does not retry, where a 502 would be sent again to the same end.
// An upstream refusing the gateway (401, 403: its key; 404: its model id)
// stays a 502, the gateway's failure.
func invalidUpstream(err error) bool {
	var ce *runtime.CallError
	if !errors.As(err, &ce) || ce.Kind != runtime.KindPermanent || ce.Layer != "" {
		return false
	}
	switch ce.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// MaxRetryAfter is the longest Retry-After the gateway sends: an upstream's
// 429 may ask for any delay (up to 31 years in seconds, or a date
// thousands of years ahead), which a client honouring it would wait out.
const MaxRetryAfter = 24 * time.Hour

// SetRetryAfter sets the Retry-After header to d in whole seconds, rounded
// up, at most MaxRetryAfter; d <= 0 sets nothing.
func SetRetryAfter(h http.Header, d time.Duration) {
	if d > 0 {
		d = min(d, MaxRetryAfter)
		h.Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
}
