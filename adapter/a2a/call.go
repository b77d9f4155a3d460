package a2a

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/babelagent/babel/agent"
)

// Run sends the input to the remote agent and returns its answer: a
// message it replies with, or the artifacts of the task it runs (its last
// status message when there are none). A task is followed by streaming
// when the agent streams (or Config.Stream says so), else by polling
// GetTask with a doubling wait; if ctx ends first, the remote task is
// cancelled with CancelTask before Run returns.
func (r *remote) Run(ctx context.Context, in agent.Message) (agent.Message, error) {
	msg, err := toA2A(r.card.Name, in)
	if err != nil {
		return agent.Message{}, err
	}
	if err := agent.Permit(ctx, agent.EffectEgress); err != nil {
		return agent.Message{}, err
	}
	hc := r.httpClient(ctx)
	card, err := r.resolve(ctx, hc)
	if err != nil {
		return agent.Message{}, err
	}
	client, err := r.client(ctx, hc, card)
	if err != nil {
		return agent.Message{}, err
	}
	defer func() { _ = client.Destroy() }()

	stream := card.Capabilities.Streaming
	if r.stream != nil {
		stream = *r.stream
	}
	p := &progress{}
	if stream {
		err = r.streamTask(ctx, client, msg, p)
	} else {
		err = r.sendTask(ctx, client, msg, p)
	}
	if err == nil && !p.done() {
		err = r.poll(ctx, client, p)
	}
	if err != nil {
		if ctx.Err() != nil && p.taskID != "" && !p.done() {
			r.cancel(ctx, client, p.taskID)
			return agent.Message{}, fmt.Errorf("%s: call ended, task %s cancelled: %w", r.peer, p.taskID, ctx.Err())
		}
		return agent.Message{}, err
	}
	return p.result(r.peer)
}

// sendTask sends msg and returns at once with the agent's reply or its
// new task.
func (r *remote) sendTask(ctx context.Context, c *a2aclient.Client, msg *a2a.Message, p *progress) error {
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		return r.fail("send message", err)
	}
	return p.apply(res)
}

// streamTask sends msg and follows the stream until the task is done or
// the stream ends (then poll takes over).
func (r *remote) streamTask(ctx context.Context, c *a2aclient.Client, msg *a2a.Message, p *progress) error {
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			if p.taskID != "" && ctx.Err() == nil {
				return nil // the stream broke after the task began: poll it
			}
			return r.fail("stream message", err)
		}
		if err := p.apply(ev); err != nil {
			return err
		}
		if p.done() {
			return nil
		}
	}
	return nil
}

// poll asks for the task until it is done, waiting PollInterval at first
// and twice as long each time after, up to MaxPollInterval.
func (r *remote) poll(ctx context.Context, c *a2aclient.Client, p *progress) error {
	if p.taskID == "" {
		return agent.NewPeerError(r.peer, 0, false, "the agent neither replied nor started a task", nil)
	}
	wait := r.opts.PollInterval
	t := time.NewTimer(wait)
	defer t.Stop()
	for !p.done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(p.taskID)})
		if err != nil {
			return r.fail("get task", err)
		}
		if err := p.apply(task); err != nil {
			return err
		}
		wait = min(2*wait, r.opts.MaxPollInterval)
		t.Reset(wait)
	}
	return nil
}

// cancel asks the agent to cancel the task the call abandoned. It runs
// after ctx ended, so it has a short context of its own.
func (r *remote) cancel(ctx context.Context, c *a2aclient.Client, taskID string) {
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), r.opts.CancelTimeout)
	defer stop()
	_, _ = c.CancelTask(cctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(taskID)})
}

// progress is what is known of the agent's answer so far.
type progress struct {
	reply     *a2a.Message // a direct reply: the exchange is over
	taskID    string
	contextID string
	state     a2a.TaskState
	status    *a2a.Message
	artifacts []*a2a.Artifact
	metadata  map[string]any
}

func (p *progress) done() bool {
	return p.reply != nil || p.state.Terminal() || p.interrupted()
}

// interrupted reports a task waiting for something a node call cannot give.
func (p *progress) interrupted() bool {
	return p.state == a2a.TaskStateInputRequired || p.state == a2a.TaskStateAuthRequired
}

func (p *progress) apply(ev a2a.Event) error {
	if id := string(ev.TaskInfo().TaskID); id != "" && p.taskID != "" && id != p.taskID {
		return fmt.Errorf("the agent sent an event of task %s during task %s", id, p.taskID)
	}
	switch e := ev.(type) {
	case *a2a.Message:
		p.reply = e
	case *a2a.Task:
		p.taskID, p.contextID = string(e.ID), e.ContextID
		p.state, p.status = e.Status.State, e.Status.Message
		p.artifacts = append([]*a2a.Artifact(nil), e.Artifacts...)
		p.metadata = e.Metadata
	case *a2a.TaskStatusUpdateEvent:
		p.taskID, p.contextID = string(e.TaskID), e.ContextID
		p.state = e.Status.State
		if e.Status.Message != nil {
			p.status = e.Status.Message
		}
	case *a2a.TaskArtifactUpdateEvent:
		p.taskID, p.contextID = string(e.TaskID), e.ContextID
		if e.Artifact != nil {
			p.addArtifact(e.Artifact, e.Append)
		}
	default:
		return fmt.Errorf("unexpected event %T", ev)
	}
	return nil
}

// addArtifact adds a, or appends its parts to the artifact of the same ID
// when the agent streams it in chunks.
func (p *progress) addArtifact(a *a2a.Artifact, appendParts bool) {
	for i, old := range p.artifacts {
		if old.ID != a.ID {
			continue
		}
		if appendParts {
			merged := *old
			merged.Parts = append(append(a2a.ContentParts(nil), old.Parts...), a.Parts...)
			if len(a.Metadata) > 0 {
				merged.Metadata = maps.Clone(old.Metadata)
				if merged.Metadata == nil {
					merged.Metadata = map[string]any{}
				}
				maps.Copy(merged.Metadata, a.Metadata)
			}
			p.artifacts[i] = &merged
		} else {
			p.artifacts[i] = a
		}
		return
	}
	p.artifacts = append(p.artifacts, a)
}

// result is the call's output, or the error of a task that ended without one.
func (p *progress) result(peer string) (agent.Message, error) {
	if p.reply != nil {
		parts, err := fromA2A(p.reply.Parts)
		if err != nil {
			return agent.Message{}, agent.NewPeerError(peer, 0, false, "malformed reply: "+err.Error(), err)
		}
		out := agent.Message{Parts: parts, Metadata: map[string]any{}}
		if p.reply.TaskID != "" {
			out.Metadata[MetaTaskID] = string(p.reply.TaskID)
		}
		if p.reply.ContextID != "" {
			out.Metadata[MetaContextID] = p.reply.ContextID
		}
		if len(p.reply.Metadata) > 0 {
			out.Metadata[MetaMetadata] = p.reply.Metadata
		}
		return out, nil
	}
	var status agent.Message
	if p.status != nil {
		parts, err := fromA2A(p.status.Parts)
		if err != nil {
			return agent.Message{}, agent.NewPeerError(peer, 0, false, "malformed status message: "+err.Error(), err)
		}
		status.Parts = parts
	}
	if p.state != a2a.TaskStateCompleted {
		te := &TaskError{TaskID: p.taskID, State: p.state, Status: status}
		msg := te.Error()
		if p.interrupted() {
			msg += ", which a node call cannot give"
		}
		return agent.Message{}, agent.NewPeerError(peer, 0, false, msg, te)
	}
	out := agent.Message{Metadata: map[string]any{MetaTaskID: p.taskID, MetaContextID: p.contextID, MetaState: string(p.state)}}
	if len(p.metadata) > 0 {
		out.Metadata[MetaMetadata] = p.metadata
	}
	var index []map[string]any
	for _, a := range p.artifacts {
		parts, err := fromA2A(a.Parts)
		if err != nil {
			return agent.Message{}, agent.NewPeerError(peer, 0, false, fmt.Sprintf("malformed artifact %s: %v", a.ID, err), err)
		}
		out.Parts = append(out.Parts, parts...)
		entry := map[string]any{"id": string(a.ID), "parts": len(parts)}
		if a.Name != "" {
			entry["name"] = a.Name
		}
		if a.Description != "" {
			entry["description"] = a.Description
		}
		if len(a.Metadata) > 0 {
			entry["metadata"] = a.Metadata
		}
		index = append(index, entry)
	}
	if index != nil {
		out.Metadata[MetaArtifacts] = index
	}
	if len(out.Parts) == 0 {
		out.Parts = status.Parts // no artifact: the final status message is the answer
	}
	return out, nil
}
