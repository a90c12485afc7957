package serve

import (
	"slices"
	"strings"
	"sync"
)

// secrets are the values an MCP server's headers, or its env's
// credentials (commandEnv), read from the environment, kept to scrub them
// from every message the server's session produces: an upstream or a proxy
// in front of it that echoes the request's Authorization in its error
// would otherwise put the credential in a tool's error result, which the
// MCP client and its model read, and in the log.
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

// minSecretLine is the length from which a line of a credential of
// several lines (a PEM key) is recorded on its own: a server's standard
// error reaches the log a line at a time, so no line holds the whole
// value. A shorter line (a PEM key's last few characters of base64) is
// not, as scrubbing it would scrub ordinary text.
const minSecretLine = 8

// add records v, unless it is too short to scrub without scrubbing
// everything else, and each line of v of minSecretLine bytes or more.
// The values are kept longest first, so that a value is scrubbed whole
// before any of its lines is.
func (s *secrets) add(v string) {
	if len(v) < 4 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(v)
	if strings.ContainsAny(v, "\r\n") {
		for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\r' || r == '\n' }) {
			if line = strings.TrimSpace(line); len(line) >= minSecretLine {
				s.record(line)
			}
		}
	}
	slices.SortStableFunc(s.values, func(a, b string) int { return len(b) - len(a) })
}

func (s *secrets) record(v string) {
	if !slices.Contains(s.values, v) {
		s.values = append(s.values, v)
	}
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

// cut returns msg, the first part of a text cut at a bound, scrubbed, and
// without its end where that is the start of a recorded value: a value
// the bound cut in two would otherwise show its first part.
func (s *secrets) cut(msg string) string {
	msg = s.scrub(msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.values {
		for n := min(len(v)-1, len(msg)); n > 0; n-- {
			if strings.HasSuffix(msg, v[:n]) {
				msg = msg[:len(msg)-n]
				break
			}
		}
	}
	return msg
}

// value returns v, a tool's result as the chain gets it (resultValue: a
// string, or decoded JSON), with the recorded values scrubbed from its
// strings (changed in place): an upstream that echoes its credential in an
// answer (a tool reporting the request it made or the headers it got)
// would otherwise hand it to the client as an error result would.
func (s *secrets) value(v any) any {
	s.mu.Lock()
	none := len(s.values) == 0
	s.mu.Unlock()
	if none {
		return v
	}
	switch x := v.(type) {
	case string:
		return s.scrub(x)
	case map[string]any:
		for k, e := range x {
			x[k] = s.value(e)
		}
	case []any:
		for i, e := range x {
			x[i] = s.value(e)
		}
	}
	return v
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
