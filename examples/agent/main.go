// Command agent is an example of a function-calling agent run through an
// agentc policy: the model (OpenAI, or any OpenAI-compatible server) calls
// the shop's tools, a guard refuses refunds over 100 without an approver,
// and every model call, tool call and the whole turn pass through the
// policy's chains.
//
//	OPENAI_API_KEY=sk-... go run ./examples/agent "Refund order B200 please"
//	go run ./examples/agent -base-url http://127.0.0.1:11434/v1 -model llama3.1 "Where is order A100?"
//
// With -base-url the model is a local OpenAI-compatible server (Ollama,
// vLLM...), which needs no key.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
)

func main() {
	dir := flag.String("policy", "examples/agent", "the policy directory")
	baseURL := flag.String("base-url", "", "an OpenAI-compatible server to use instead of the policy's provider")
	model := flag.String("model", "llama3.1", "the model id at -base-url")
	flag.Parse()
	input := strings.Join(flag.Args(), " ")
	if input == "" {
		input = "Please refund order B200."
	}
	var models map[string]runtime.ModelClient
	if *baseURL != "" {
		c, err := openai.New(openai.Config{Model: *model, BaseURL: *baseURL, APIKey: os.Getenv("OPENAI_API_KEY")})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		models = map[string]runtime.ModelClient{"primary": c}
	} else if os.Getenv("OPENAI_API_KEY") == "" {
		fmt.Fprintln(os.Stderr, "agent: set OPENAI_API_KEY, or point -base-url at an OpenAI-compatible server")
		os.Exit(2)
	}
	res, err := run(context.Background(), *dir, input, models, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v (%s)\n", err, runtime.Classify(err))
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "steps=%d tool_calls=%d blocked=%d tokens=%d/%d stop=%s\n",
		res.Steps, res.ToolCalls, res.Blocked, res.Usage.InputTokens, res.Usage.OutputTokens, res.Stop)
}
