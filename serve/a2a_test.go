package serve

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/babelagent/babel/graph"
)

func a2aHTTP(t *testing.T, token string) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 20 * time.Second, Transport: bearer{token: token, base: tr}}
}

func a2aClient(t *testing.T, ts *testServer, token string) (*a2aclient.Client, *a2a.AgentCard) {
	t.Helper()
	ctx := context.Background()
	hc := a2aHTTP(t, token)
	card, err := agentcard.NewResolver(hc).Resolve(ctx, ts.base)
	if err != nil {
		t.Fatalf("agent card: %v", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c, card
}

func sendText(graphName, text string) *a2a.SendMessageRequest {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	if graphName != "" {
		m.Metadata = map[string]any{"graph": graphName}
	}
	return &a2a.SendMessageRequest{Message: m}
}

func artifactText(t *testing.T, task *a2a.Task) string {
	t.Helper()
	if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
		t.Fatalf("artifacts: %+v", task.Artifacts)
	}
	return task.Artifacts[0].Parts[0].Text()
}

func TestA2ACardHasOneSkillPerGraph(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline", "typed")
	_, card := a2aClient(t, ts, aliceToken)
	if len(card.Skills) != 2 || card.Skills[0].ID != "pipeline" || card.Skills[1].ID != "typed" {
		t.Errorf("skills: %+v", card.Skills)
	}
	if !card.Capabilities.Streaming || len(card.SecurityRequirements) == 0 {
		t.Errorf("card: %+v", card)
	}
	if card.SupportedInterfaces[0].URL != ts.base+"/a2a" || card.SupportedInterfaces[0].ProtocolVersion != a2a.Version {
		t.Errorf("interfaces: %+v", card.SupportedInterfaces[0])
	}
	// The card is behind the same authentication as the rest.
	if _, err := agentcard.NewResolver(a2aHTTP(t, "")).Resolve(context.Background(), ts.base); err == nil {
		t.Error("the card was served without a token")
	}
}

func TestA2ASendGetListAndIsolation(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline", "typed")
	c, _ := a2aClient(t, ts, aliceToken)
	ctx := context.Background()

	res, err := c.SendMessage(ctx, sendText("pipeline", "  agents  "))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result %T", res)
	}
	if task.Status.State != a2a.TaskStateCompleted || artifactText(t, task) != "AGENTS" {
		t.Errorf("task: %+v", task)
	}
	// The task is the run: same id, alice's, readable over REST.
	if code, _, b := ts.do("GET", "/v1/runs/"+string(task.ID), aliceToken, nil); code != http.StatusOK || decodeRun(t, b).Principal != "token:alice" {
		t.Errorf("the task as a run: %d %s", code, b)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || got.ContextID != task.ContextID {
		t.Errorf("GetTask: %v %+v", err, got)
	}
	list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != task.ID {
		t.Errorf("ListTasks: %v %+v", err, list)
	}
	// bob cannot see it.
	bc, _ := a2aClient(t, ts, bobToken)
	if _, err := bc.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's GetTask of alice's task: %v, want task not found", err)
	}
	if _, err := bc.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's CancelTask: %v", err)
	}
	// The graph can be chosen by a first data part too.
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"graph": "typed", "input": map[string]any{"name": "bo"}}))
	res, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
	if err != nil || artifactText(t, res.(*a2a.Task)) != "BO" {
		t.Errorf("data-part selection: %v %+v", err, res)
	}
	// With two graphs and none named, the error says how to name one.
	if _, err := c.SendMessage(ctx, sendText("", "x")); !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), `"graph"`) {
		t.Errorf("no graph named: %v", err)
	}
	if _, err := c.SendMessage(ctx, sendText("nope", "x")); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("unknown graph: %v", err)
	}
}

func TestA2AStreamingEndsWithTheFinalState(t *testing.T) {
	ts := startServer(t, serverSetup{}, "nap")
	c, _ := a2aClient(t, ts, aliceToken)
	var states []a2a.TaskState
	var output string
	for ev, err := range c.SendStreamingMessage(context.Background(), sendText("nap", "stream")) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			states = append(states, e.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, e.Status.State)
		case *a2a.TaskArtifactUpdateEvent:
			output = e.Artifact.Parts[0].Text()
		}
	}
	if len(states) < 3 || states[0] != a2a.TaskStateWorking || states[len(states)-1] != a2a.TaskStateCompleted {
		t.Errorf("states: %v", states)
	}
	if output != "STREAM" {
		t.Errorf("output %q", output)
	}
}

func TestA2ACancelStopsTheRun(t *testing.T) {
	p := &probe{started: make(chan struct{}), stopped: make(chan struct{})}
	ts := startServer(t, serverSetup{extra: []*graph.Graph{probeGraph(t, "blocker", p)}})
	c, _ := a2aClient(t, ts, aliceToken)
	ctx := context.Background()
	req := sendText("blocker", "x")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateWorking {
		t.Errorf("state %s", task.Status.State)
	}
	<-p.started
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.stopped:
	case <-time.After(time.Second):
		t.Fatal("the run did not stop")
	}
	if got.Status.State != a2a.TaskStateCanceled {
		t.Errorf("after cancel: %s", got.Status.State)
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("second cancel: %v", err)
	}
}

func TestA2AVersion03MethodNames(t *testing.T) {
	ts := startServer(t, serverSetup{}, "pipeline")
	hc := a2aHTTP(t, aliceToken)
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{{URL: ts.base + "/a2a/v0.3", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version}},
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	res, err := c.SendMessage(context.Background(), sendText("", " old "))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateCompleted || artifactText(t, task) != "OLD" {
		t.Errorf("task: %+v", task)
	}
	if got, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.ID != task.ID {
		t.Errorf("tasks/get: %v", err)
	}
	// The raw 0.3 method names.
	code, _, b := ts.do("POST", "/a2a/v0.3", aliceToken, `{"jsonrpc":"2.0","id":"1","method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"raw"}]}}}`)
	if code != http.StatusOK || !strings.Contains(string(b), `"RAW"`) || !strings.Contains(string(b), `"completed"`) {
		t.Errorf("message/send: %d %s", code, b)
	}
}
