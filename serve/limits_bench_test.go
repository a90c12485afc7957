package serve

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
)

// BenchmarkChargeBody charges the reads of chunked bodies, every
// goroutine a request of its own tenant, with one tenant (the gateway's
// bound alone) and with eight (its tenant's share too).
func BenchmarkChargeBody(b *testing.B) {
	for _, tenants := range []int{1, 8} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			s := &Server{opts: Options{MaxInFlightBytes: 1 << 50, MaxInFlightBytesPerTenant: 1 << 50}, tenantBytes: map[string]*tenantBody{}}
			g := &generation{tenants: tenants}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				x := &exchange{s: s, g: g, caller: caller{tenant: fmt.Sprint(next.Add(1) % int64(tenants))}}
				for pb.Next() {
					if !s.chargeBody(x, 1400) {
						b.Error("refused")
						return
					}
				}
				s.leaveBody(x)
			})
		})
	}
}

// segmentReader returns its bytes a TCP segment's worth (1,400) a read,
// the smallest reads a chunked body gets.
type segmentReader struct{ r *bytes.Reader }

func (s segmentReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 1400)]) }
func (segmentReader) Close() error                 { return nil }

// BenchmarkChunkedBody reads 1 MiB chunked bodies through budgetBody in
// segments, as BenchmarkChargeBody charges them.
func BenchmarkChunkedBody(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1<<20)
	for _, tenants := range []int{1, 8} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			s := &Server{opts: Options{MaxInFlightBytes: 1 << 50, MaxInFlightBytesPerTenant: 1 << 50}, tenantBytes: map[string]*tenantBody{}}
			g := &generation{tenants: tenants}
			var next atomic.Int64
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				tenant := fmt.Sprint(next.Add(1) % int64(tenants))
				buf := make([]byte, 32<<10)
				for pb.Next() {
					x := &exchange{s: s, g: g, caller: caller{tenant: tenant}}
					r := &budgetBody{ReadCloser: segmentReader{bytes.NewReader(body)}, x: x}
					for {
						_, err := r.Read(buf)
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
					s.leaveBody(x)
				}
			})
		})
	}
}
