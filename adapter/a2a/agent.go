package a2a

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	bhttp "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
)

// TaskError says a remote task ended without a result: failed, rejected,
// canceled by the agent, or waiting for input a node call cannot give. It
// is the Err of the *agent.PeerError such a call returns; its Error text
// never includes the agent's words, which are in Status.
type TaskError struct {
	TaskID string
	State  a2a.TaskState
	// Status is the task's last status message, if any.
	Status agent.Message
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("remote task %s ended in state %s", e.TaskID, e.State)
}

// remote is a remote A2A agent. Each Run reads the card and opens its own
// client, so Run is safe for concurrent use.
type remote struct {
	url     string
	peer    string
	stream  *bool
	eg      *egress.Client
	headers *bhttp.Headers
	opts    Options
	card    agent.Card
}

// New returns the agent at cfg.URL without connecting: its card is named
// after the URL until the remote card is read at the first call. Use
// Discover for an agent whose card carries the remote name and
// description.
func New(cfg *Config) (agent.Agent, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.URL)
	// The URL is decided now, so a topology naming a blocked address fails
	// to compile; every address dialed (the card's endpoints included) is
	// decided again on every request.
	var base *egress.Options
	if cfg.Options != nil {
		base = cfg.Options.Egress
	}
	eg, hosts, err := bhttp.Egress(base, &graph.NodeSpec{Egress: cfg.Egress, AllowPrivate: cfg.AllowPrivate}, cfg.URL)
	if err != nil {
		return nil, err
	}
	headers, err := bhttp.NewHeaders(cfg.Headers, cfg.Auth, cfg.Secrets)
	if err != nil {
		return nil, err
	}
	r := &remote{url: cfg.URL, peer: "a2a " + u.Host, stream: cfg.Stream, eg: eg, headers: headers, opts: cfg.Options.withDefaults()}
	r.card = agent.Card{
		Name:         redact(u),
		Description:  "remote A2A agent at " + redact(u),
		Kind:         Kind,
		Egress:       hosts,
		Secrets:      headers.Secrets(),
		Effects:      []agent.Effect{agent.EffectEgress},
		ReadsOutside: true,
	}
	return r, nil
}

// Discover reads the remote agent's card and returns the agent with the
// card's name and description.
func Discover(ctx context.Context, cfg *Config) (agent.Agent, error) {
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r := a.(*remote)
	card, err := r.resolve(ctx, r.httpClient(ctx))
	if err != nil {
		return nil, err
	}
	if card.Name != "" {
		r.card.Name = card.Name
	}
	r.card.Description = card.Description
	return r, nil
}

func (r *remote) Card() agent.Card { return r.card }

// httpClient is the guarded client for one call.
func (r *remote) httpClient(ctx context.Context) *http.Client { return r.headers.Client(ctx, r.eg) }

func (r *remote) resolve(ctx context.Context, hc *http.Client) (*a2a.AgentCard, error) {
	card, err := agentcard.NewResolver(hc).Resolve(ctx, r.url)
	if err != nil {
		return nil, r.fail("read agent card", err)
	}
	if len(card.SupportedInterfaces) == 0 {
		return nil, agent.NewPeerError(r.peer, 0, false, "the agent card lists no supported interfaces (an A2A 0.3 card is not read)", nil)
	}
	return card, nil
}

// client opens an SDK client for card over the guarded HTTP client only:
// JSON-RPC or REST, never the SDK's default transports.
func (r *remote) client(ctx context.Context, hc *http.Client, card *a2a.AgentCard) (*a2aclient.Client, error) {
	c, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithDefaultsDisabled(),
		a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithRESTTransport(hc),
	)
	if err != nil {
		return nil, r.fail("connect", err)
	}
	return c, nil
}

// protocolErrors are the A2A errors an agent answers with; trying again
// does not help, except for its internal and server errors.
var protocolErrors = []error{
	a2a.ErrParseError, a2a.ErrInvalidRequest, a2a.ErrMethodNotFound, a2a.ErrInvalidParams,
	a2a.ErrTaskNotFound, a2a.ErrTaskNotCancelable, a2a.ErrPushNotificationNotSupported,
	a2a.ErrUnsupportedOperation, a2a.ErrUnsupportedContentType, a2a.ErrInvalidAgentResponse,
	a2a.ErrExtendedCardNotConfigured, a2a.ErrExtensionSupportRequired, a2a.ErrVersionNotSupported,
	a2a.ErrUnauthenticated, a2a.ErrUnauthorized,
}

// fail turns an error of the exchange into what a caller decides on: the
// context's error when the call was cancelled, the egress guard's refusal
// (never retried), an A2A error (never retried but for internal errors), an
// HTTP status for the card (retried for 429 and 5xx), or a transport
// failure (retryable). The agent's own words stay in Err.
func (r *remote) fail(op string, err error) error {
	var pe *egress.PolicyError
	if errors.As(err, &pe) {
		return agent.NewPeerError(r.peer, 0, false, op+": "+pe.Error(), pe)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s: %w", r.peer, op, err)
	}
	var le *egress.LimitError
	if errors.As(err, &le) {
		return agent.NewPeerError(r.peer, 0, false, op+": "+le.Error(), err)
	}
	var se *agentcard.ErrStatusNotOK
	if errors.As(err, &se) {
		retry := se.StatusCode == http.StatusTooManyRequests || se.StatusCode >= 500
		return agent.NewPeerError(r.peer, se.StatusCode, retry, op+": HTTP "+http.StatusText(se.StatusCode), err)
	}
	for _, pe := range protocolErrors {
		if errors.Is(err, pe) {
			return agent.NewPeerError(r.peer, 0, false, op+": the agent answered "+a2a.ErrorReason(err), err)
		}
	}
	if errors.Is(err, a2a.ErrInternalError) || errors.Is(err, a2a.ErrServerError) {
		return agent.NewPeerError(r.peer, 0, true, op+": the agent answered "+a2a.ErrorReason(err), err)
	}
	return agent.NewPeerError(r.peer, 0, true, op+": the exchange failed", err)
}

var _ agent.Agent = (*remote)(nil)
