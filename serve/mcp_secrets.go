package serve

import (
	"slices"
	"strings"
	"sync"
)

// secrets are the values an MCP server's headers read from the
// environment (its credentials), kept to scrub them from every message
// the server's session produces: an upstream or a proxy in front of it
// that echoes the request's Authorization in its error would otherwise
// put the credential in a tool's error result, which the MCP client and
// its model read, and in the log.
type secrets struct {
	mu     sync.Mutex
	values []string
}

// lookup returns lookupEnv, recording the values it reads.
func (s *secrets) lookup(lookupEnv func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := lookupEnv(name)
		if ok {
			s.add(v)
		}
		return v, ok
	}
}

// add records v, unless it is too short to scrub without scrubbing
// everything else.
func (s *secrets) add(v string) {
	if len(v) < 4 {
		return
	}
	s.mu.Lock()
	if !slices.Contains(s.values, v) {
		s.values = append(s.values, v)
	}
	s.mu.Unlock()
}

// scrub replaces the recorded values in msg.
func (s *secrets) scrub(msg string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.values {
		msg = strings.ReplaceAll(msg, v, "[redacted]")
	}
	return msg
}

// err returns err with the recorded values scrubbed from its message;
// errors.Is and errors.As still reach err through it.
func (s *secrets) err(err error) error {
	if err == nil {
		return nil
	}
	if msg := s.scrub(err.Error()); msg != err.Error() {
		return &scrubbedError{msg: msg, err: err}
	}
	return err
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
