package dsl

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckShape(t *testing.T) {
	tests := []struct {
		name         string
		src          string
		depth, chain int
	}{
		{"flat", "package p\na: 1\nb: 2\n", 0, 0},
		{"label chain", "x: a: b: c: 1\n", 3, 0},
		{"braces", "x: {a: {b: 1}}\n", 2, 0},
		{"chain ends at comma", "x: a: 1, y: b: 2\n", 1, 0},
		{"chain inside a struct", "x: {a: b: c: 1}\n", 3, 0},
		{"strings and comments do not count", "x: \"a: b: {{{\" // a: b: c: [[[\n", 0, 0},
		{"operators", "x: 1 + 2 * 3 & int\n", 0, 3},
		{"selectors", "x: a.b.c.d\n", 0, 3},
		{"a line ending in an operator continues", "x: 1 +\n 2 +\n 3\n", 0, 2},
		{"operators reset per element", "x: [1+1, 1+1, 1+1]\n", 1, 1},
		{"unbalanced closers", "}}}}\nx: {a: 1}\n", 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sh := checkShape("p.cue", []byte(tc.src))
			assert.Equal(t, tc.depth, sh.depth, "depth")
			assert.Equal(t, tc.chain, sh.chain, "chain")
		})
	}
	sh := checkShape("p.cue", []byte("x: "+strings.Repeat("a: ", 300)+"1\n"))
	assert.Equal(t, Pos{File: "p.cue", Line: 1, Col: 2 + 3*(MaxNesting+1)}, sh.depthAt)
}

// TestWithDeadline covers the bound on evaluations abandoned past their
// deadline: once MaxAbandoned are still running, new work is refused, and
// the count drops as they finish.
func TestWithDeadline(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, withDeadline(ctx, time.Second, func() {}))

	release := make(chan struct{})
	for i := 0; i < MaxAbandoned; i++ {
		err := withDeadline(ctx, 10*time.Millisecond, func() { <-release })
		require.ErrorIs(t, err, errDeadline)
	}
	ran := false
	err := withDeadline(ctx, time.Second, func() { ran = true })
	assert.ErrorIs(t, err, ErrEvaluationBusy)
	assert.False(t, ran)

	close(release)
	require.Eventually(t, func() bool { return abandoned.Load() == 0 }, time.Second, time.Millisecond)
	assert.NoError(t, withDeadline(ctx, time.Second, func() { ran = true }))
	assert.True(t, ran)

	cctx, cancel := context.WithCancel(ctx)
	block := make(chan struct{})
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	err = withDeadline(cctx, time.Minute, func() { <-block })
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	close(block)
	require.Eventually(t, func() bool { return abandoned.Load() == 0 }, time.Second, time.Millisecond)
}

// TestTooLargeSizes: a file just over a limit is not said to be as large
// as the limit ("4.0 MiB, larger than the 4.0 MiB limit"); the sizes are
// then given in bytes.
func TestTooLargeSizes(t *testing.T) {
	assert.Equal(t, "file is 10.0 MiB, larger than the 4.0 MiB limit",
		(&TooLargeError{Size: 10 << 20, Limit: MaxFileSize}).Error())
	assert.Equal(t, "file is 4194319 bytes, larger than the 4.0 MiB (4194304 bytes) limit",
		(&TooLargeError{Size: MaxFileSize + 15, Limit: MaxFileSize}).Error())
	assert.Equal(t, "file is 1048577 bytes, larger than the 1.0 MiB (1048576 bytes) limit",
		(&TooLargeError{Size: MaxSchemaFileSize + 1, Limit: MaxSchemaFileSize}).Error())
}
