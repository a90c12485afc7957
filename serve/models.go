package serve

import (
	"fmt"
	"net/http"
	"time"
)

// clientAPI tells the API of the client that sent r: Anthropic's, whose
// SDKs send the anthropic-version header (the API requires it), or else
// OpenAI's. The key header does not tell: other clients send x-api-key too.
func clientAPI(r *http.Request) api {
	if r.Header.Get("anthropic-version") != "" {
		return apiAnthropic
	}
	return apiOpenAI
}

// The model objects of each API: OpenAI's and Anthropic's.
type (
	openAIModel struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	anthropicModel struct {
		ID          string `json:"id"`
		Type        string `json:"type"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
)

// modelObject returns the model name in the API of x.
func (x *exchange) modelObject(name string, now time.Time) any {
	if x.api == apiAnthropic {
		return anthropicModel{ID: name, Type: "model", DisplayName: name, CreatedAt: now.UTC().Format(time.RFC3339)}
	}
	return openAIModel{ID: name, Object: "model", Created: now.Unix(), OwnedBy: x.g.plan.Policy}
}

// listModels answers GET /v1/models: the policy's models (what a client may
// name in "model"), in the list format of the client's API (clientAPI):
// Anthropic's, one page holding every model, or OpenAI's.
func (s *Server) listModels(x *exchange) {
	now := time.Now()
	data := make([]any, 0, len(x.g.models))
	for _, name := range x.g.models {
		data = append(data, x.modelObject(name, now))
	}
	if x.api == apiAnthropic {
		out := struct {
			Data    []any   `json:"data"`
			HasMore bool    `json:"has_more"`
			FirstID *string `json:"first_id"`
			LastID  *string `json:"last_id"`
		}{Data: data}
		if n := len(x.g.models); n > 0 {
			out.FirstID, out.LastID = &x.g.models[0], &x.g.models[n-1]
		}
		x.writeJSON(http.StatusOK, out)
		return
	}
	x.writeJSON(http.StatusOK, struct {
		Object string `json:"object"`
		Data   []any  `json:"data"`
	}{Object: "list", Data: data})
}

// getModel answers GET /v1/models/{model}: the model, named as in the list
// (a model the request names by its provider's model id, when one model
// alone has it, comes back under the policy's name), in the client's API;
// a model the policy does not declare is 404 unknown_model.
func (s *Server) getModel(x *exchange) {
	asked := x.r.PathValue("model")
	name, ok := x.g.resolveModel(asked)
	if !ok {
		x.err = fmt.Errorf("model %q is not declared by the policy (GET /v1/models lists the models)", asked)
		x.fail(http.StatusNotFound, errUnknownModel, x.err.Error())
		return
	}
	x.model = name
	x.writeJSON(http.StatusOK, x.modelObject(name, time.Now()))
}
