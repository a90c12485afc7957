package prove

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// copyRun drives one copy of step 0 through the gate as the probes do,
// noting when it runs the tool.
func copyRun(ctx context.Context, g *gate, i int, ran func(int)) {
	path := "0/" + itoa(i)
	g.enter(ctx, path)
	g.progress(path)
	g.arrive(ctx, path)
	ran(i)
	g.end(path)
}

// Copies admitted together both reach the tool before either runs it, and
// run it first copy first, however late the second copy's goroutine is
// scheduled: its wait for the second does not start before the second
// entered the chain.
func TestGateAdmitsALateCopyTogether(t *testing.T) {
	ctx := context.Background()
	g := newGate(2, true)
	var mu sync.Mutex
	var order []int
	var atTool []bool
	ran := func(i int) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, i)
		g.mu.Lock()
		atTool = append(atTool, len(g.steps["0"].at) == 2)
		g.mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() { copyRun(ctx, g, 0, ran) })
	wg.Go(func() {
		time.Sleep(10 * barrierGrace) // scheduled late
		copyRun(ctx, g, 1, ran)
	})
	wg.Wait()
	assert.Equal(t, []int{0, 1}, order)
	assert.Equal(t, []bool{true, true}, atTool, "both copies reached the tool before the first ran it")
}

// One after the other, the second copy enters the chain once the first
// ended its call, even when its goroutine runs first.
func TestGateOneAfterTheOther(t *testing.T) {
	ctx := context.Background()
	g := newGate(2, false)
	var mu sync.Mutex
	var order []int
	ran := func(i int) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, i)
	}
	var wg sync.WaitGroup
	wg.Go(func() { copyRun(ctx, g, 1, ran) })
	wg.Go(func() {
		time.Sleep(10 * barrierGrace)
		copyRun(ctx, g, 0, ran)
	})
	wg.Wait()
	assert.Equal(t, []int{0, 1}, order)
}
