// Package hedge implements the hedge builtin (stage chat): it races the
// configured models. The first starts at once; each next one starts after
// `delay`, or at once when a started model fails with a transient error or
// an open breaker. The first model to deliver a delta (or to finish
// successfully without one) wins: the others are cancelled, and the hedge
// layer waits for them to return before it returns, so no goroutine outlives
// the call. The winner's deltas are forwarded in order on the caller's
// goroutine. A permanent failure ends the race with that error; when every
// model fails, the last error is returned.
//
// Each racer runs the inner layers on its own copy of the call
// (ChatCall.Clone); the winner's served model, usage and attempts are copied
// back. Model clients must return promptly when their context is cancelled.
package hedge
