package serve

import "time"

// listModels answers GET /v1/models in OpenAI's list format: the policy's
// models (what a client may name in "model").
func (s *Server) listModels(x *exchange) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	created := time.Now().Unix()
	for _, name := range x.g.models {
		out.Data = append(out.Data, model{ID: name, Object: "model", Created: created, OwnedBy: x.g.plan.Policy})
	}
	x.writeJSON(200, out)
}
