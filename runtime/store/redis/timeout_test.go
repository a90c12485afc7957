package redis_test

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A server that does not answer (its writes paused) makes a budget
// reservation and an idempotency claim fail within the store's timeout, and
// the store serves again once the server does.
func TestAnOperationOnAPausedServerFailsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := storetest.Redis(t, redis.WithTimeout(timeout))
	ctx := context.Background()
	opt := s.Client().Options()
	assert.Equal(t, timeout, opt.ReadTimeout)
	assert.Equal(t, timeout, opt.WriteTimeout)
	assert.Equal(t, timeout, opt.DialTimeout)
	assert.Zero(t, opt.MaxRetries, "the client never sends a command again by itself")
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err := s.Reserve(ctx, "ledger", "r0", lim, 0)
	require.NoError(t, err, "the scripts are loaded")
	_, err = s.Acquire(ctx, "other", time.Minute, time.Hour, false)
	require.NoError(t, err)

	// WRITE pauses only the commands that may write (scripts included),
	// for as long as the test needs, and not the other clients' reads.
	pause := 1200 * time.Millisecond
	admin := goredis.NewClient(&goredis.Options{Addr: opt.Addr, DB: opt.DB, Username: opt.Username, Password: opt.Password})
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "WRITE").Err())
	paused := time.Now()
	t.Cleanup(func() { admin.Do(context.Background(), "CLIENT", "UNPAUSE") })

	start := time.Now()
	_, err = s.Reserve(ctx, "ledger", "r1", lim, 0)
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redis budget")
	assert.Less(t, took, timeout+200*time.Millisecond, "bounded by the timeout")

	start = time.Now()
	_, err = s.Acquire(ctx, "refund", time.Minute, time.Hour, false)
	took = time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, timeout+200*time.Millisecond)

	start = time.Now()
	err = s.Settle(ctx, "ledger", "", runtime.Ledger{Calls: 1}, 0)
	took = time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, timeout+200*time.Millisecond)

	time.Sleep(time.Until(paused.Add(pause + 100*time.Millisecond)))
	_, err = s.Reserve(ctx, "ledger", "r2", lim, 0)
	assert.NoError(t, err, "the store serves again once the server answers")
	l, err := s.LedgerOf(ctx, "ledger")
	require.NoError(t, err)
	assert.LessOrEqual(t, l.Calls, int64(1), "the settlement that timed out was not sent again")
}

// withQuery appends query options to a server URL.
func withQuery(url, q string) string {
	if strings.Contains(url, "?") {
		return url + "&" + q
	}
	return url + "?" + q
}

// A timeout in the URL longer than the store's, or one the URL turns off
// (-1), does not hold a call longer than the store's timeout: the smaller
// of the two bounds each command. A shorter one in the URL is kept.
func TestAURLTimeoutNeverOutlastsTheStores(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ctx := context.Background()
	for _, q := range []string{"read_timeout=-1&write_timeout=-1&dial_timeout=-1&pool_timeout=-1", "read_timeout=10s&write_timeout=1m"} {
		s, err := redis.Open(ctx, withQuery(storetest.ServerURL(t, storetest.RedisEnv), q), storetest.Prefix(t), redis.WithTimeout(timeout))
		require.NoError(t, err, q)
		t.Cleanup(func() { _ = s.Close() })
		opt := s.Client().Options()
		for name, d := range map[string]time.Duration{"read": opt.ReadTimeout, "write": opt.WriteTimeout, "dial": opt.DialTimeout, "pool": opt.PoolTimeout} {
			assert.Equal(t, timeout, d, "%s: %s timeout", q, name)
		}
		calls := int64(10)
		lim := runtime.BudgetLimits{Calls: &calls}
		_, err = s.Reserve(ctx, "ledger", "r0", lim, 0)
		require.NoError(t, err, "the scripts are loaded")

		pause := 1200 * time.Millisecond
		admin := goredis.NewClient(&goredis.Options{Addr: opt.Addr, DB: opt.DB, Username: opt.Username, Password: opt.Password})
		require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "WRITE").Err())
		start := time.Now()
		_, err = s.Reserve(ctx, "ledger", "r1", lim, 0)
		took := time.Since(start)
		admin.Do(ctx, "CLIENT", "UNPAUSE")
		_ = admin.Close()
		require.Error(t, err, q)
		assert.Less(t, took, timeout+200*time.Millisecond, "%s: bounded by the store's timeout", q)
	}
	s, err := redis.Open(ctx, withQuery(storetest.ServerURL(t, storetest.RedisEnv), "read_timeout=100ms"), storetest.Prefix(t), redis.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	assert.Equal(t, 100*time.Millisecond, s.Client().Options().ReadTimeout, "a shorter URL timeout is kept")
	assert.Equal(t, timeout, s.Client().Options().WriteTimeout)
}

// listen serves connections on 127.0.0.1 with serve (nil: it accepts them
// and never answers, a blackholed server), closing them when the test
// ends. It returns its redis:// URL.
func listen(t *testing.T, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if serve != nil {
				go serve(c)
			}
		}
	}()
	return "redis://" + ln.Addr().String() + "/0"
}

// Opening a store on a server that accepts and never answers fails within
// the store's timeout, whatever the caller's context: the handshake, the
// ping and the read of its memory settings share it.
func TestOpenOnASilentServerFailsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	url := listen(t, nil)
	start := time.Now()
	s, err := redis.Open(context.Background(), url, "", redis.WithTimeout(timeout))
	took := time.Since(start)
	if s != nil {
		_ = s.Close()
	}
	require.Error(t, err)
	assert.Less(t, took, timeout+200*time.Millisecond, "bounded by the timeout")
}

// Reading the audit records of a server that stopped answering fails
// within the store's timeout too.
func TestRecordsOnAStalledServerFailWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	s, err := redis.Open(context.Background(), p.URL, "records-timeout", redis.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Records(context.Background(), "")
	require.NoError(t, err)
	p.Stall()
	start := time.Now()
	_, err = s.Records(context.Background(), "")
	took := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, timeout+200*time.Millisecond, "bounded by the timeout")
}

// slowServer is a Redis server on 127.0.0.1 that answers every command,
// each after delay (nanoseconds, read at each command): a server each of
// whose answers comes within a timeout, their sum past it. It answers
// HELLO as a server before RESP3 does, INFO with nothing and XRANGE with
// no entries. It returns its redis:// URL.
func slowServer(t *testing.T, delay *atomic.Int64) string {
	return listen(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			cmd, err := readCommand(r)
			if err != nil {
				return
			}
			time.Sleep(time.Duration(delay.Load())) // the server's slowness, not the test's synchronisation
			reply := "+OK\r\n"
			switch strings.ToUpper(cmd) {
			case "HELLO":
				reply = "-ERR unknown command 'HELLO'\r\n"
			case "PING":
				reply = "+PONG\r\n"
			case "INFO":
				reply = "$0\r\n\r\n"
			case "XRANGE":
				reply = "*0\r\n"
			}
			if _, err := c.Write([]byte(reply)); err != nil {
				return
			}
		}
	})
}

// readCommand reads one command (an array of bulk strings) and returns its
// name.
func readCommand(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return "", err
	}
	var name string
	for i := range n {
		if _, err := r.ReadString('\n'); err != nil { // $<len>
			return "", err
		}
		arg, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if i == 0 {
			name = strings.TrimSpace(arg)
		}
	}
	return name, nil
}

// Opening a store on a server each of whose answers comes within the
// timeout (the handshake, the ping, the read of its memory settings)
// takes no longer than the timeout as a whole, and neither does a read of
// its audit records on a new connection (its handshake and the command).
func TestOpenAndRecordsOnASlowServerTakeTheTimeoutAsAWhole(t *testing.T) {
	const timeout = 400 * time.Millisecond
	var delay atomic.Int64
	delay.Store(int64(150 * time.Millisecond))
	url := slowServer(t, &delay)
	start := time.Now()
	s, err := redis.Open(context.Background(), url, "", redis.WithTimeout(timeout))
	assert.Less(t, time.Since(start), timeout+200*time.Millisecond, "opening is bounded by the timeout: %v", err)
	if s != nil {
		_ = s.Close()
	}

	delay.Store(0)
	s, err = redis.Open(context.Background(), url, "", redis.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	delay.Store(int64(250 * time.Millisecond))
	// Two at once: one of them dials a connection of its own.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			start := time.Now()
			_, err := s.Records(context.Background(), "")
			assert.Less(t, time.Since(start), timeout+200*time.Millisecond, "reading the records is bounded by the timeout: %v", err)
		})
	}
	wg.Wait()
}
