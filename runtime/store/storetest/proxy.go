package storetest

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Proxy forwards TCP connections from 127.0.0.1 to a test server. It can
// lose the server's answer to one command: the command reaches the server
// and runs there, and the proxy cuts the connection instead of passing the
// answer on, as a network that fails after the request does. It can cut
// every connection and stop listening, and listen again on the same
// address: a store outage without touching the server. It can stall: keep
// every connection open and pass nothing more either way, a server that
// stopped answering.
type Proxy struct {
	// URL is the server's URL with the proxy's address in place of the
	// server's.
	URL string

	t      testing.TB
	target string
	addr   string
	pg     bool
	lose   atomic.Int32
	stall  atomic.Bool
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

// NewProxy starts a proxy to the server of serverURL (a redis:// or
// postgres:// URL, sslmode=disable for PostgreSQL), closed when the test
// ends.
func NewProxy(t testing.TB, serverURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	p := &Proxy{t: t, target: u.Host, pg: u.Scheme == "postgres" || u.Scheme == "postgresql", conns: map[net.Conn]struct{}{}}
	p.listen("127.0.0.1:0")
	u.Host = p.addr
	p.URL = u.String()
	t.Cleanup(p.Cut)
	return p
}

// LoseNextReply makes the proxy lose the next answer the server sends: a
// Redis reply, or the PostgreSQL messages up to ReadyForQuery that carry a
// row (the result of a statement; a transaction of its own has committed
// by then). Until then PostgreSQL's messages are held up to each
// ReadyForQuery, and passed on when they carry no row.
func (p *Proxy) LoseNextReply() { p.lose.Add(1) }

// Stall passes nothing more either way from now on, on the connections
// open and on new ones, which stay open until Cut: the client waits for
// answers that never come.
func (p *Proxy) Stall() { p.stall.Store(true) }

// Cut closes the listener and every connection through it.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Drop closes every connection through the proxy and goes on listening:
// a network that failed under the connections open, the server unaware.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore listens again on the address of before Cut.
func (p *Proxy) Restore() { p.listen(p.addr) }

func (p *Proxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	require.NoError(p.t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[s] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { p.forward(s, c); _ = s.Close() }()
			go p.answer(c, s)
		}
	}()
}

// forward passes what the client sends on to the server, until either
// side closes; once stalled, it drops it.
func (p *Proxy) forward(s, c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && !p.stall.Load() {
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// answer passes the server's answers on to the client, losing one when
// asked, and then closing both connections.
func (p *Proxy) answer(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	if !p.pg {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 && p.take() {
				return
			}
			if n > 0 && !p.stall.Load() {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	r := bufio.NewReader(s)
	var batch []byte
	rows := false
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		body := make([]byte, int(binary.BigEndian.Uint32(head[1:]))-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if p.stall.Load() {
			continue
		}
		if len(batch) == 0 && p.lose.Load() == 0 {
			// Nothing to lose: passed on at once (an authentication
			// request waits for the client's answer, with no ReadyForQuery).
			if _, err := c.Write(append(head[:], body...)); err != nil {
				return
			}
			continue
		}
		batch = append(append(batch, head[:]...), body...)
		rows = rows || head[0] == 'D'
		if head[0] != 'Z' {
			continue
		}
		if rows && p.take() {
			return
		}
		if _, err := c.Write(batch); err != nil {
			return
		}
		batch, rows = batch[:0], false
	}
}

// take consumes one answer to lose, if any.
func (p *Proxy) take() bool {
	for {
		n := p.lose.Load()
		if n <= 0 {
			return false
		}
		if p.lose.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
