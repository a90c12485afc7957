//go:build !unix

package postgres

import "net"

// idleEnded reports false: without a peek at the socket an ended
// connection is found by the statement sent on it.
func idleEnded(net.Conn) bool { return false }
