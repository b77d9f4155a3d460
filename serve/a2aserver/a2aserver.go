// Package a2aserver is the A2A door of `babel serve`, built with the
// official a2a-go SDK: an agent card with one skill per served graph, and
// the JSON-RPC methods (A2A 1.0: SendMessage, SendStreamingMessage,
// GetTask, ListTasks, CancelTask, SubscribeToTask; and the same under the
// 0.3 names message/send, message/stream, tasks/get, tasks/cancel,
// tasks/resubscribe) mapped onto the one run path in package service. A
// task is a run: the task id is the run id, and a caller sees only its own.
//
// Choosing the graph: a message names it in its metadata ({"graph": NAME}),
// or its first data part is {"graph": NAME, "input": ...}. With a single
// served graph, naming it is optional. The input is the data part's
// "input" when it has one; else a message of one data part gives that
// value, and any other message is taken part by part (text stays text).
//
// This package never runs a graph outside the service, never answers a
// request without a principal, and never puts an internal error message in
// a response.
package a2aserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/run"
	"github.com/babelagent/babel/serve/service"
)

// Paths the door serves under.
const (
	PathJSONRPC   = "/a2a"
	PathJSONRPC03 = "/a2a/v0.3"
	PathCard      = a2asrv.WellKnownAgentCardPath
)

// tagContext is the run tag that keeps a task's A2A context id.
const tagContext = "a2a.context_id"

// Options configures the A2A door. Nil means the defaults.
type Options struct {
	// Version is the agent card's version.
	Version string
	// PublicURL is the base URL put in the agent card; empty means
	// http://HOST of the request (the Host header is pinned to loopback names
	// on a loopback server).
	PublicURL string
	// Bearer says the server needs bearer tokens, so the card declares it.
	Bearer bool
	// Logger receives internal errors under their correlation ids.
	Logger *slog.Logger
}

// Handler is the A2A request handler over a service.
type Handler struct {
	svc  *service.Service
	opts Options
	log  *slog.Logger
}

var _ a2asrv.RequestHandler = (*Handler)(nil)

// New returns the A2A handler over svc.
func New(svc *service.Service, opts *Options) *Handler {
	h := &Handler{svc: svc}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.Version == "" {
		h.opts.Version = "dev"
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// JSONRPC returns the A2A 1.0 JSON-RPC transport over h.
func (h *Handler) JSONRPC() http.Handler {
	return a2asrv.NewJSONRPCHandler(h, h.transportOptions()...)
}

// JSONRPC03 returns the A2A 0.3 JSON-RPC transport over h.
func (h *Handler) JSONRPC03() http.Handler {
	return a2av0.NewJSONRPCHandler(h, h.transportOptions()...)
}

func (h *Handler) transportOptions() []a2asrv.TransportOption {
	return []a2asrv.TransportOption{
		a2asrv.WithTransportKeepAlive(15 * time.Second),
		a2asrv.WithTransportPanicHandler(func(r any) error {
			id := service.NewCorrelationID()
			h.log.Error("a2a handler panicked", "correlation_id", id, "panic", fmt.Sprint(r))
			return a2a.NewError(a2a.ErrInternalError, "internal error (correlation id "+id+")")
		}),
	}
}

// Card returns the agent card, with base as the URL the transports are at
// and a skill for each graph that show says may be shown (nil: all).
func (h *Handler) Card(base string, show func(graph string) bool) *a2a.AgentCard {
	modes := []string{"text/plain", "application/json"}
	card := &a2a.AgentCard{
		Name:        "babel",
		Description: "Babelagent: each skill runs one graph. Name the graph in the message metadata {\"graph\": NAME} or in a first data part {\"graph\": NAME, \"input\": ...}.",
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: base + PathJSONRPC, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: base + PathJSONRPC03, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  modes,
		DefaultOutputModes: modes,
		Version:            h.opts.Version,
		Skills:             []a2a.AgentSkill{},
	}
	for _, name := range h.svc.GraphNames() {
		if show != nil && !show(name) {
			continue
		}
		info, _ := h.svc.Graph(name)
		desc := info.Description
		if desc == "" {
			desc = "Run the graph " + name + "."
		}
		tags := []string{"graph"}
		for _, e := range info.Effects {
			tags = append(tags, "effect:"+string(e))
		}
		if info.ReadOnly() {
			tags = append(tags, "read-only")
		}
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: name, Name: name, Description: desc, Tags: tags,
			InputModes: modes, OutputModes: modes})
	}
	if h.opts.Bearer {
		card.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "A token from the server's token file"}}
		card.SecurityRequirements = a2a.SecurityRequirementsOptions{{"bearer": {}}}
	}
	return card
}

// CardHandler serves the agent card. It is not public: it sits behind the
// same authentication as the rest of the server, and lists only the skills
// (graphs) the caller may run.
func (h *Handler) CardHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		base := h.opts.PublicURL
		if base == "" {
			base = "http://" + r.Host
		}
		p, ok := service.PrincipalFrom(r.Context())
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		b, err := json.Marshal(h.Card(base, func(g string) bool { return h.svc.Allowed(r.Context(), p, g) }))
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

func principal(ctx context.Context) (service.Principal, error) {
	p, ok := service.PrincipalFrom(ctx)
	if !ok {
		return p, a2a.NewError(a2a.ErrUnauthenticated, "no principal")
	}
	return p, nil
}

// toA2A maps a service error onto the A2A error taxonomy with a safe message.
func (h *Handler) toA2A(err error, task bool) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return a2a.NewError(a2a.ErrServerError, "the request ended before the run")
	}
	e := service.AsError(err)
	msg := string(e.Code) + ": " + e.Message
	switch e.Code {
	case service.CodeNotFound:
		if task {
			return a2a.NewError(a2a.ErrTaskNotFound, "task not found")
		}
		return a2a.NewError(a2a.ErrInvalidParams, msg)
	case service.CodeBadRequest, service.CodeInvalidInput, service.CodeInvalidJSON, service.CodeInvalidLimit:
		return a2a.NewError(a2a.ErrInvalidParams, msg)
	case service.CodeUnauthorized:
		return a2a.NewError(a2a.ErrUnauthenticated, msg)
	case service.CodeForbidden:
		return a2a.NewError(a2a.ErrUnauthorized, msg)
	case service.CodeNotCancellable:
		return a2a.NewError(a2a.ErrTaskNotCancelable, msg)
	case service.CodeRateLimited, service.CodeBusy, service.CodeShuttingDown:
		return a2a.NewError(a2a.ErrServerError, msg).WithDetails(map[string]any{
			"code": string(e.Code), "retry_after_s": int((e.RetryAfter + time.Second - 1) / time.Second)})
	}
	id := service.NewCorrelationID()
	cause := "<nil>"
	if e.Err != nil {
		cause = e.Err.Error()
	}
	h.log.Error("a2a request failed", "correlation_id", id, "error", cause)
	return a2a.NewError(a2a.ErrInternalError, "internal error (correlation id "+id+")")
}

// request turns an A2A message into the run to start.
func (h *Handler) request(req *a2a.SendMessageRequest) (*service.StartRequest, string, error) {
	msg := req.Message
	if msg == nil {
		return nil, "", a2a.NewError(a2a.ErrInvalidParams, "the request has no message")
	}
	if msg.TaskID != "" {
		return nil, "", a2a.NewError(a2a.ErrUnsupportedOperation, "a finished run takes no more input: send a new message without taskId")
	}
	graphName := ""
	if g, ok := msg.Metadata["graph"].(string); ok {
		graphName = g
	} else if g, ok := req.Metadata["graph"].(string); ok {
		graphName = g
	}
	var in *agent.Message
	parts := msg.Parts
	if len(parts) > 0 {
		if d, ok := parts[0].Content.(a2a.Data); ok {
			if m, ok := d.Value.(map[string]any); ok {
				if g, ok := m["graph"].(string); ok {
					if graphName != "" && graphName != g {
						return nil, "", a2a.NewError(a2a.ErrInvalidParams, "the metadata and the first data part name different graphs")
					}
					graphName = g
					parts = parts[1:]
					if v, ok := m["input"]; ok {
						raw, err := json.Marshal(v)
						if err != nil {
							return nil, "", a2a.NewError(a2a.ErrInvalidParams, "the input is not JSON")
						}
						m := agent.FromJSON(raw)
						in = &m
					}
				}
			}
		}
	}
	if graphName == "" {
		names := h.svc.GraphNames()
		if len(names) != 1 {
			return nil, "", a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf(
				`%d graphs are served here: name one in the message metadata {"graph": NAME} or a first data part {"graph": NAME, "input": ...}`, len(names)))
		}
		graphName = names[0]
	}
	if in == nil {
		m, err := fromParts(parts)
		if err != nil {
			return nil, "", err
		}
		in = &m
	}
	contextID := msg.ContextID
	if contextID == "" {
		contextID = a2a.NewContextID()
	}
	return &service.StartRequest{Graph: graphName, Input: *in, Tags: map[string]string{tagContext: contextID}}, contextID, nil
}

// fromParts converts A2A parts to the graph's input.
func fromParts(parts []*a2a.Part) (agent.Message, error) {
	if len(parts) == 0 {
		return agent.Message{}, a2a.NewError(a2a.ErrInvalidParams, "the message has no input: send a text or data part")
	}
	var m agent.Message
	for i, p := range parts {
		if p == nil {
			return agent.Message{}, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("part %d is empty", i))
		}
		switch c := p.Content.(type) {
		case a2a.Text:
			m.Parts = append(m.Parts, agent.Part{Kind: agent.PartText, Text: string(c)})
		case a2a.Data:
			raw, err := json.Marshal(c.Value)
			if err != nil {
				return agent.Message{}, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("part %d: data is not JSON", i))
			}
			m.Parts = append(m.Parts, agent.Part{Kind: agent.PartData, Data: raw})
		case a2a.Raw:
			m.Parts = append(m.Parts, agent.Part{Kind: agent.PartFile, File: &agent.File{Name: p.Filename, MediaType: p.MediaType, Bytes: []byte(c)}})
		case a2a.URL:
			m.Parts = append(m.Parts, agent.Part{Kind: agent.PartFile, File: &agent.File{Name: p.Filename, MediaType: p.MediaType, URI: string(c)}})
		default:
			return agent.Message{}, a2a.NewError(a2a.ErrUnsupportedContentType, fmt.Sprintf("part %d: unsupported content", i))
		}
	}
	return m, nil
}

// state maps a run status to a task state.
func state(s run.Status) a2a.TaskState {
	switch s {
	case run.StatusSucceeded:
		return a2a.TaskStateCompleted
	case run.StatusFailed, run.StatusLimitExceeded:
		return a2a.TaskStateFailed
	case run.StatusCancelled:
		return a2a.TaskStateCanceled
	case run.StatusDenied:
		return a2a.TaskStateRejected
	case run.StatusAwaitingApproval:
		// A human must decide before the run can go on: the closest A2A state.
		return a2a.TaskStateInputRequired
	}
	return a2a.TaskStateWorking
}

func contextOf(v *service.View) string {
	if c := v.Tags[tagContext]; c != "" {
		return c
	}
	return v.RunID
}

// task renders a run as a task: its output as the "output" artifact, what
// went wrong as the status message, and the run shape in the metadata.
func task(v *service.View) *a2a.Task {
	ts := v.FinishedAt
	if ts.IsZero() {
		ts = time.Now()
	}
	t := &a2a.Task{
		ID:        a2a.TaskID(v.RunID),
		ContextID: contextOf(v),
		Status:    a2a.TaskStatus{State: state(v.Status), Timestamp: &ts},
		Metadata:  map[string]any{"graph": v.Graph, "run": v.JSON},
	}
	if v.Code != "" {
		t.Status.Message = statusMessage(t, v)
	}
	if v.Status == run.StatusSucceeded {
		t.Artifacts = []*a2a.Artifact{{ID: "output", Name: "output", Parts: a2a.ContentParts{outputPart(v)}}}
	}
	return t
}

func statusMessage(info a2a.TaskInfoProvider, v *service.View) *a2a.Message {
	text := string(v.Code) + ": " + v.Message
	if v.CorrelationID != "" {
		text += " (correlation id " + v.CorrelationID + ")"
	}
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(text))
}

func outputPart(v *service.View) *a2a.Part {
	if len(v.Output) > 0 && v.Output[0] == '"' {
		return a2a.NewTextPart(v.OutputText())
	}
	var val any
	if err := json.Unmarshal(v.Output, &val); err != nil {
		return a2a.NewTextPart(string(v.Output))
	}
	return a2a.NewDataPart(val)
}

// SendMessage starts a run and, unless the request asks to return
// immediately, waits for it.
func (h *Handler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	sreq, _, err := h.request(req)
	if err != nil {
		return nil, err
	}
	if req.Config != nil && req.Config.ReturnImmediately {
		id, err := h.svc.Start(ctx, p, sreq)
		if err != nil {
			return nil, h.toA2A(err, false)
		}
		v, err := h.svc.Get(ctx, p, id)
		if err != nil {
			return nil, h.toA2A(err, true)
		}
		return task(v), nil
	}
	v, err := h.svc.Run(ctx, p, sreq)
	if v == nil || err != nil {
		return nil, h.toA2A(err, false)
	}
	return task(v), nil
}

// SendStreamingMessage starts a run and streams it: the task, a working
// update per finished node, the output artifact, the final status.
func (h *Handler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		p, err := principal(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		sreq, _, err := h.request(req)
		if err != nil {
			yield(nil, err)
			return
		}
		id, err := h.svc.Start(ctx, p, sreq)
		if err != nil {
			yield(nil, h.toA2A(err, false))
			return
		}
		h.stream(ctx, p, id, yield)
	}
}

// stream yields the task of run id, then its updates until it ends.
func (h *Handler) stream(ctx context.Context, p service.Principal, id string, yield func(a2a.Event, error) bool) {
	v, err := h.svc.Get(ctx, p, id)
	if err != nil {
		yield(nil, h.toA2A(err, true))
		return
	}
	if !yield(task(v), nil) {
		return
	}
	if v.Status != run.StatusRunning {
		return
	}
	info := a2a.TaskInfo{TaskID: a2a.TaskID(id), ContextID: contextOf(v)}
	sub, err := h.svc.Subscribe(ctx, p, id)
	if err != nil {
		yield(nil, h.toA2A(err, true))
		return
	}
	errStop := errors.New("stop")
	err = sub.Stream(ctx, 0, 0, func(_ int, ev *run.Event) error {
		var text string
		switch ev.Type {
		case run.EventNodeFinished:
			text = "node " + ev.Node + " finished"
		case run.EventNodeFailed:
			text = "node " + ev.Node + ": " + ev.Error
		default:
			return nil
		}
		up := a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(text)))
		if !yield(up, nil) {
			return errStop
		}
		return nil
	})
	if err != nil {
		return
	}
	final, err := h.svc.Wait(ctx, p, id)
	if err != nil {
		yield(nil, h.toA2A(err, true))
		return
	}
	if final.Status == run.StatusSucceeded {
		art := a2a.NewArtifactEvent(info, outputPart(final))
		art.Artifact.ID, art.Artifact.Name, art.LastChunk = "output", "output", true
		if !yield(art, nil) {
			return
		}
	}
	var msg *a2a.Message
	if final.Code != "" {
		msg = statusMessage(info, final)
	}
	up := a2a.NewStatusUpdateEvent(info, state(final.Status), msg)
	up.Metadata = map[string]any{"run": final.JSON}
	yield(up, nil)
}

// GetTask returns the caller's task.
func (h *Handler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	v, err := h.svc.Get(ctx, p, string(req.ID))
	if err != nil {
		return nil, h.toA2A(err, true)
	}
	return task(v), nil
}

// ListTasks returns the caller's tasks, newest first.
func (h *Handler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	size := req.PageSize
	if size <= 0 || size > 100 {
		size = 50
	}
	vs, err := h.svc.List(ctx, p, 1000)
	if err != nil {
		return nil, h.toA2A(err, false)
	}
	out := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}}
	for _, v := range vs {
		t := task(v)
		if req.ContextID != "" && t.ContextID != req.ContextID {
			continue
		}
		if req.Status != "" && t.Status.State != req.Status {
			continue
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		out.TotalSize++
		if len(out.Tasks) < size {
			out.Tasks = append(out.Tasks, t)
		}
	}
	out.PageSize = len(out.Tasks)
	return out, nil
}

// CancelTask cancels the caller's task; in-flight work stops.
func (h *Handler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	cctx, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	v, err := h.svc.Cancel(cctx, p, string(req.ID))
	if err != nil {
		return nil, h.toA2A(err, true)
	}
	return task(v), nil
}

// SubscribeToTask streams the caller's task from its current state.
func (h *Handler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		p, err := principal(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, p, string(req.ID), yield)
	}
}

var errNoPush = a2a.NewError(a2a.ErrPushNotificationNotSupported, "push notifications are not supported")

func (h *Handler) GetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, errNoPush
}

func (h *Handler) ListTaskPushConfigs(context.Context, *a2a.ListTaskPushConfigRequest) ([]*a2a.PushConfig, error) {
	return nil, errNoPush
}

func (h *Handler) CreateTaskPushConfig(context.Context, *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, errNoPush
}

func (h *Handler) DeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigRequest) error {
	return errNoPush
}

func (h *Handler) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.NewError(a2a.ErrExtendedCardNotConfigured, "there is no extended agent card")
}
