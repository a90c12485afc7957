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

// Proxy forwards TCP connections from 127.0.0.1 to a test server and can
// lose the server's answer to one command: the command reaches the server
// and runs there, and the proxy cuts the connection instead of passing the
// answer on, as a network that fails after the request does.
type Proxy struct {
	// URL is the server's URL with the proxy's address in place of the
	// server's.
	URL string

	target string
	pg     bool
	lose   atomic.Int32
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
}

// NewProxy starts a proxy to the server of serverURL (a redis:// or
// postgres:// URL, sslmode=disable for PostgreSQL), closed when the test
// ends.
func NewProxy(t testing.TB, serverURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{target: u.Host, pg: u.Scheme == "postgres" || u.Scheme == "postgresql", ln: ln}
	u.Host = ln.Addr().String()
	p.URL = u.String()
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// LoseNextReply makes the proxy lose the next answer the server sends: a
// Redis reply, or the PostgreSQL messages up to ReadyForQuery that carry a
// row (the result of a statement; a transaction of its own has committed
// by then).
func (p *Proxy) LoseNextReply() { p.lose.Add(1) }

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() {
			_, _ = io.Copy(s, c)
			_ = s.Close()
		}()
		go p.answer(c, s)
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
			if n > 0 {
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
