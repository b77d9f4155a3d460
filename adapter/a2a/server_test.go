package a2a_test

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/babelagent/babel/egress"
)

// executeFunc is what the test agent does with a message.
type executeFunc func(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error]

// executor is an a2asrv.AgentExecutor whose behaviour each test chooses.
// Cancel records the task and reports it canceled, as the SDK's template
// does.
type executor struct {
	execute   executeFunc
	cancelled chan a2a.TaskID
}

func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return e.execute(ctx, ec)
}

func (e *executor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	select {
	case e.cancelled <- ec.TaskID:
	default:
	}
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// methodLog counts the protocol methods the server handled.
type methodLog struct {
	a2asrv.PassthroughCallInterceptor
	mu    sync.Mutex
	calls map[string]int
}

func (m *methodLog) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[cc.Method()]++
	return ctx, nil, nil
}

func (m *methodLog) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[method]
}

// a2aServer is a remote agent built with the official A2A Go SDK, serving
// its card and JSON-RPC on loopback.
type a2aServer struct {
	url       string
	private   string // allow_private entry
	methods   *methodLog
	cancelled chan a2a.TaskID
}

// newA2AServer starts the agent; wrap, if given, fronts every request (an
// authentication check).
func newA2AServer(t testing.TB, streaming bool, execute executeFunc, wrap ...func(http.Handler) http.Handler) *a2aServer {
	t.Helper()
	exec := &executor{execute: execute, cancelled: make(chan a2a.TaskID, 8)}
	log := &methodLog{calls: map[string]int{}}
	handler := a2asrv.NewHandler(exec, a2asrv.WithCallInterceptors(log))
	mux := http.NewServeMux()
	var front http.Handler = mux
	for _, w := range wrap {
		front = w(front)
	}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{
		Name:                "Echo Agent",
		Description:         "Says back what it is told.",
		Version:             "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: streaming},
		DefaultInputModes:   []string{"text/plain", "application/json"},
		DefaultOutputModes:  []string{"text/plain", "application/json"},
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(handler))
	return &a2aServer{url: srv.URL + "/", private: egress.AllowPrivateURL(srv.URL), methods: log, cancelled: exec.cancelled}
}

// replyWith answers every message with a message of the same parts.
func echoMessage(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		reply := a2a.NewMessage(a2a.MessageRoleAgent, ec.Message.Parts...)
		reply.Metadata = ec.Message.Metadata
		yield(reply, nil)
	}
}

// echoTask runs a task that returns the message's parts as an artifact,
// streamed in two chunks.
func echoTask(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		parts := ec.Message.Parts
		first := a2a.NewArtifactEvent(ec, parts[:1]...)
		first.Artifact.Name = "echo"
		if !yield(first, nil) {
			return
		}
		if len(parts) > 1 {
			rest := a2a.NewArtifactUpdateEvent(ec, first.Artifact.ID, parts[1:]...)
			rest.Append = true
			rest.LastChunk = true
			if !yield(rest, nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// slowTask works until it is cancelled.
func slowTask(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		<-ctx.Done()
	}
}

// failingTask fails with words of its own.
func failingTask(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("the backend is on fire"))
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, msg), nil)
	}
}
