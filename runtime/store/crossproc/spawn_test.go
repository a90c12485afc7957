package crossproc_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workerLimit is the longest a worker may run: every scenario ends in
// seconds, so one still running by then is stuck (a store call that does
// not return, a loop whose end never comes).
const workerLimit = 2 * time.Minute

// deadlineGrace is the time kept before the test's deadline to dump a
// stuck worker's goroutines, kill it and report it: 30 s, or a quarter of
// the time left when that is less.
const deadlineGrace = 30 * time.Second

// deadline returns the test's deadline less its grace, if it has one.
func deadline(t *testing.T) (time.Time, bool) {
	d, ok := t.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return d.Add(-min(deadlineGrace, time.Until(d)/4)), true
}

// limit returns when a worker started now is taken for stuck: after
// workerLimit, or at the test's deadline less its grace if that comes
// first.
func limit(t *testing.T) time.Time {
	end := time.Now().Add(workerLimit)
	if d, ok := deadline(t); ok && d.Before(end) {
		end = d
	}
	return end
}

// testContext returns a context that ends at the test's deadline, less
// its grace, for the test's own store calls.
func testContext(t *testing.T) context.Context {
	ctx := context.Background()
	if d, ok := deadline(t); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		t.Cleanup(cancel)
	}
	return ctx
}

// worker is a worker process of a group. Its stdout lines go to lines,
// which closes when it ends; what it writes to stderr is kept and shown
// when the test fails. A worker still running at its limit is stuck: its
// goroutines are dumped (SIGQUIT), it is killed and the test fails with
// its output. It exits by itself once the test process is gone (its stdin
// ends), so that none outlives the test.
type worker struct {
	name  string
	cmd   *exec.Cmd
	stdin io.Closer
	lines <-chan string
	// stdout and stderr hold what it wrote, to be read once it exited.
	stdout bytes.Buffer
	stderr bytes.Buffer
	// exited closes once the worker exited; err is then its exit.
	exited chan struct{}
	err    error
	// limit is how long it may run; due closes when that time has come
	// (expire).
	limit  time.Duration
	due    chan struct{}
	expiry sync.Once
	// stuck closes once the worker was found stuck and killed.
	stuck chan struct{}
}

// spawn starts a worker of scenario with arg.
func (g *group) spawn(scenario, arg string) *worker {
	g.t.Helper()
	g.n++
	w := &worker{name: fmt.Sprintf("%s #%d", scenario, g.n), exited: make(chan struct{}),
		limit: time.Until(limit(g.t)), due: make(chan struct{}), stuck: make(chan struct{})}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envScenario+"="+scenario, envBackend+"="+g.b.kind, envURL+"="+g.b.url,
		envPrefix+"="+g.prefix, envDir+"="+g.dir, envStart+"="+strconv.FormatInt(g.start.UnixNano(), 10), envArg+"="+arg)
	out, err := cmd.StdoutPipe()
	require.NoError(g.t, err)
	// The parent holds the write end of the worker's stdin until the
	// worker ends: the worker reads its end only once the parent is gone.
	w.stdin, err = cmd.StdinPipe()
	require.NoError(g.t, err)
	cmd.Stderr = &w.stderr
	cmd.WaitDelay = 5 * time.Second
	w.cmd = cmd
	require.NoError(g.t, cmd.Start(), w.name)
	lines := make(chan string, 1024)
	w.lines = lines
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			_, _ = fmt.Fprintln(&w.stdout, sc.Text())
			lines <- sc.Text()
		}
		close(lines)
		w.err = cmd.Wait()
		close(w.exited)
	}()
	timer := time.AfterFunc(w.limit, w.expire)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		w.watch(g.report)
	}()
	g.t.Cleanup(func() {
		// A worker the test left running (it failed before its end) is
		// killed: nothing waits for it any more.
		timer.Stop()
		_ = w.kill()
		_ = w.end()
		<-watched
		select {
		case <-w.stuck:
			return // reported with its output
		default:
		}
		if g.t.Failed() {
			g.t.Logf("worker %s: %v\nstdout:\n%s\nstderr:\n%s", w.name, w.err, w.stdout.String(), w.stderr.String())
		}
	})
	return w
}

// expire makes the worker's limit come now.
func (w *worker) expire() { w.expiry.Do(func() { close(w.due) }) }

// watch waits for the worker to exit or its limit to come; a worker still
// running then has its goroutines dumped (SIGQUIT), is killed and is
// reported.
func (w *worker) watch(report func(*worker)) {
	select {
	case <-w.exited:
		return
	case <-w.due:
	}
	if w.cmd.Process.Signal(syscall.SIGQUIT) == nil {
		select {
		case <-w.exited:
		case <-time.After(10 * time.Second):
		}
	}
	_ = w.cmd.Process.Kill()
	<-w.exited
	close(w.stuck)
	report(w)
}

// reportStuck fails t with a stuck worker's output, its goroutines
// included.
func reportStuck(t *testing.T) func(*worker) {
	return func(w *worker) {
		t.Errorf("worker %s (pid %d) was still running after %s: killed\nstdout:\n%s\nstderr:\n%s",
			w.name, w.cmd.Process.Pid, w.limit.Round(time.Second), w.stdout.String(), w.stderr.String())
	}
}

// kill kills the worker (SIGKILL); its lines up to its end can still be
// read.
func (w *worker) kill() error { return w.cmd.Process.Kill() }

// end waits for the worker to exit, the lines not read yet discarded, and
// returns its exit error. A stuck worker is killed at its limit.
func (w *worker) end() error {
	go func() {
		for range w.lines {
		}
	}()
	<-w.exited
	return w.err
}

// next returns the worker's next line; a worker that ended without one
// fails the test.
func (w *worker) next(t *testing.T) string {
	t.Helper()
	l, ok := <-w.lines
	if !ok {
		<-w.exited
		require.FailNowf(t, "the worker ended without the line awaited", "worker %s: %v\nstdout:\n%s\nstderr:\n%s",
			w.name, w.err, w.stdout.String(), w.stderr.String())
	}
	return l
}

// awaitStdinEnd makes a worker exit once its stdin ends: the test process
// that started it is gone.
func awaitStdinEnd() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Fprintln(os.Stderr, "worker: the test process is gone")
	os.Exit(3)
}

// A worker that never ends is found stuck at its limit: its goroutines
// are dumped, it is killed, and it is reported with its output.
func TestAStuckWorkerIsKilledAndShown(t *testing.T) {
	g := newGroup(t, backend{kind: "none"}, 0)
	reported := make(chan string, 1)
	g.report = func(w *worker) { reported <- w.stderr.String() }
	w := g.spawn("stuck", "")
	require.Equal(t, "started", w.next(t))
	w.expire()
	require.Error(t, w.end())
	<-w.stuck
	stderr := <-reported
	assert.Contains(t, stderr, "SIGQUIT", "its goroutines were dumped")
	assert.Contains(t, stderr, "crossproc_test.work(", "where it was stuck is shown")
}

// A worker whose test process is gone (its stdin ends) exits by itself.
func TestAWorkerEndsWithItsTestProcess(t *testing.T) {
	g := newGroup(t, backend{kind: "none"}, 0)
	w := g.spawn("stuck", "")
	require.Equal(t, "started", w.next(t))
	require.NoError(t, w.stdin.Close())
	err := w.end()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 3, exit.ExitCode())
	assert.Contains(t, w.stderr.String(), "the test process is gone")
	select {
	case <-w.stuck:
		t.Fatal("the worker was killed as stuck")
	default:
	}
}
