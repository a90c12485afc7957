package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
)

// rpcShape lists the members of a JSON-RPC message and of its params that
// the MCP server reads, for the key checks of checkRPCBody: a member given
// twice, or spelt in another case, is read by encoding/json (the MCP
// server's reader) otherwise than by a reader of the text that reads keys
// exactly and may read the first of a key given twice (a proxy, a log, a
// guard before the gateway): {"name": "delete_all", "name": "echo"} runs
// echo. The other members are not refused: the methods' params vary.
var rpcShape = &shape{fields: []field{{"jsonrpc", nil}, {"id", nil}, {"method", nil},
	{"params", obj("name", "arguments", "_meta", "cursor", "uri", "protocolVersion", "capabilities", "clientInfo",
		"requestId", "reason", "level", "progressToken", "progress", "total", "message", "ref", "argument")},
	{"result", nil}, {"error", nil}}}

// maxExactID is 2^53: the MCP server reads a numeric id as a float64 and
// answers under its integer part, so an id is answered as sent only when it
// is an integer a float64 holds exactly.
var maxExactID = new(big.Int).Lsh(big.NewInt(1), 53)

// checkRPCBody refuses a POST /mcp body that the chat routes would refuse
// for its JSON: data after the first message (encoding/json's decoder, the
// MCP server's, serves the first and drops the rest unanswered), a key of
// a message or of its params given twice or spelt in another case
// (rpcShape), and an id that is a number but not an integer of at most
// 2^53 in magnitude (the answer would carry another id: 7.9 answered as 7,
// after the tool ran). A body that is not JSON at all is left to the MCP
// server, which answers it with a parse error.
func checkRPCBody(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var msg json.RawMessage
	if err := dec.Decode(&msg); err != nil {
		return nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("the body holds data after the first JSON-RPC message (at byte %d); send one message a request", dec.InputOffset())
	}
	c := fieldCheck{b: msg}
	var msgs []json.RawMessage
	switch i := c.ws(0); msg[i] {
	case '{':
		c.object(i, rpcShape)
		msgs = []json.RawMessage{msg}
	case '[':
		c.array(i, rpcShape)
		_ = json.Unmarshal(msg, &msgs)
	}
	if len(c.keys) > 0 {
		return errors.New(c.keys[0])
	}
	for _, m := range msgs {
		var env struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(m, &env) != nil || len(env.ID) == 0 {
			continue
		}
		if id := string(env.ID); id[0] == '-' || id[0] >= '0' && id[0] <= '9' {
			r, ok := new(big.Rat).SetString(id)
			if !ok || !r.IsInt() || new(big.Int).Abs(r.Num()).Cmp(maxExactID) > 0 {
				return fmt.Errorf("id: %s is a number but not an integer of at most 2^53 in magnitude, which the server could not answer under the same id; send an integer or a string", id)
			}
		}
	}
	return nil
}

// checkedBody reads r, keeping what it read; at its end it checks the body
// (checkRPCBody) and, refused, sets *refused and fails the read.
type checkedBody struct {
	r       io.Reader
	read    []byte
	refused *error
}

func (c *checkedBody) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.read = append(c.read, b[:n]...)
	if errors.Is(err, io.EOF) {
		if cerr := checkRPCBody(c.read); cerr != nil {
			*c.refused = cerr
			return n, cerr
		}
	}
	return n, err
}
