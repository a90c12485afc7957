package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// LogTo sends what the Redis client library logs by itself (a connection
// pool that failed to dial the server, a connection it dropped) to l, at
// level warn with the message "redis client" and the library's text as
// detail, instead of the library's own line on standard error, which a
// log in another format (agentc serve -log json) would carry unparsed.
// The library has one logger per process, so this applies to every store.
func LogTo(l *slog.Logger) { goredis.SetLogger(clientLog{l}) }

// clientLog is the library's logger over a slog.Logger.
type clientLog struct{ l *slog.Logger }

func (c clientLog) Printf(ctx context.Context, format string, v ...any) {
	c.l.WarnContext(ctx, "redis client", "detail", strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}
