package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentc-dev/agentc/runtime/store/sqlite"
)

// A Store is a durable key-value store: a claim made with SetIfAbsent holds
// until it expires, across restarts.
func ExampleStore() {
	dir, _ := os.MkdirTemp("", "agentc")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	first, _ := s.SetIfAbsent(ctx, "job-7", []byte("worker-a"), time.Minute)
	second, _ := s.SetIfAbsent(ctx, "job-7", []byte("worker-b"), time.Minute)
	_ = s.Close()

	s, _ = sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	defer s.Close()
	v, ok, _ := s.Get(ctx, "job-7")
	fmt.Println(first, second, string(v), ok)
	// Output: true false worker-a true
}
