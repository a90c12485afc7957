package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/agentc-dev/agentc/runtime"
)

// countFields are the members of a Messages request body that the token
// counting endpoint takes (thinking too: with it, earlier turns' thinking
// blocks are not counted); the others (stream, max_tokens, sampling, stop
// sequences, metadata) change no count and the endpoint refuses them.
var countFields = []string{"model", "messages", "system", "tools", "tool_choice", "cache_control", "output_config", "thinking"}

// CountTokens returns the number of input tokens req would cost the model,
// as the API's token counting endpoint (POST /v1/messages/count_tokens)
// counts them: the same body Stream sends, without the members that ask for
// generation, sent through the SDK with the client's base URL and key, and
// req.Betas as the anthropic-beta header. Failures are *runtime.CallError,
// classified as Stream's are.
func (c *Client) CountTokens(ctx context.Context, req *runtime.ChatRequest) (int64, error) {
	body, err := c.countBody(req)
	if err != nil {
		return 0, &runtime.CallError{Kind: runtime.KindPermanent, Status: http.StatusBadRequest, Message: fmt.Sprintf("anthropic %s: %v", c.cfg.Model, err)}
	}
	var params anthropic.MessageCountTokensParams
	param.SetJSON(body, &params)
	var raw *http.Response
	// The SDK reads the answer whole: a count's is a few bytes.
	opts := append(requestOptions(req, &raw), option.WithMiddleware(capBody))
	res, err := c.msgs.CountTokens(ctx, params, opts...)
	if err != nil {
		return 0, c.failure(ctx, err, 0)
	}
	if raw != nil {
		runtime.ReportUpstreamRequestID(ctx, raw.Header.Get("request-id"))
	}
	return res.InputTokens, nil
}

// countBody is the body of a token count: the request body Stream would
// send, reduced to countFields.
func (c *Client) countBody(req *runtime.ChatRequest) ([]byte, error) {
	full, err := c.body(req)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(full, &members); err != nil {
		return nil, err
	}
	kept := make(map[string]json.RawMessage, len(countFields))
	for _, k := range countFields {
		if v, ok := members[k]; ok {
			kept[k] = v
		}
	}
	return json.Marshal(kept)
}
