// Package telemetry turns the kernel's run and call hooks into
// OpenTelemetry spans and Prometheus metrics, so an operator can see what
// Babelagent did, for whom, how long it took and how it ended.
//
// It must never record content by default: no arguments, no outputs, no
// prompts and no error text reach a span or a metric unless the operator
// sets Options.IncludeContent, and even then every string passes through
// the operator's redaction function first. Spans say which node ran, with
// which adapter and declared effects, on whose behalf, in which run, and a
// content-free error class ("denied", "timeout", "peer"...).
//
// Nothing leaves the process unless an OTLP endpoint (or a test exporter)
// is configured. The package keeps no global state: it builds its own
// TracerProvider and its own Prometheus registry, and never touches the
// otel globals or the default Prometheus registry.
//
// Telemetry is not the audit log: spans may be sampled, dropped or lost
// with the collector. The record of what happened is package audit's.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/kernel"
)

// Span names.
const (
	SpanRun  = "babel.run"
	SpanCall = "babel.call"
)

// Span attribute keys. None of them holds content except AttrInput and the
// exception event's message, which are only set with Options.IncludeContent.
const (
	AttrRunID       = "babel.run_id"
	AttrRootRunID   = "babel.root_run_id"
	AttrParentRunID = "babel.parent_run_id" // absent for a top-level run
	AttrGraph       = "babel.graph"
	AttrPrincipal   = "babel.principal"
	AttrRunStatus   = "babel.run.status"

	AttrNode        = "babel.node"
	AttrAgent       = "babel.agent"   // the agent card's name, e.g. "builtin:trim"
	AttrAdapter     = "babel.adapter" // the card's kind: builtin, http, mcp, llm...
	AttrEffects     = "babel.effects" // declared effects; ["none"] when there are none
	AttrAttempt     = "babel.attempt"
	AttrCallKind    = "babel.call.kind"   // "node", or "tool" for a call made by another node's agent
	AttrToolParent  = "babel.tool_parent" // the node whose agent called this tool
	AttrInputLabels = "babel.input_labels"
	AttrCallStatus  = "babel.call.status" // "ok" or "error"
	AttrErrorType   = "error.type"        // content-free error class, see the package doc
	AttrInput       = "babel.call.input"  // IncludeContent only, redacted
)

// maxContent bounds each content string recorded with IncludeContent.
const maxContent = 2048

// Options configures a Tracer. Nil means the defaults: no spans exported,
// no metrics, no content.
type Options struct {
	// ServiceName names this process in exported spans (default "babel").
	ServiceName string
	// OTLPEndpoint is the OTLP/HTTP collector to export spans to, as a URL
	// ("http://localhost:4318"; "/v1/traces" is used when the URL has no
	// path; https is used for an https URL). Empty means no span leaves the
	// process.
	OTLPEndpoint string
	// OTLPHeaders are sent with every export, for example a collector token.
	OTLPHeaders map[string]string
	// Exporter receives the spans instead of an OTLP endpoint; tests pass
	// tracetest.NewInMemoryExporter(). It takes precedence over OTLPEndpoint.
	Exporter sdktrace.SpanExporter
	// Sampler decides which runs are recorded; nil means every run, unless
	// an incoming parent span says it is not sampled.
	Sampler sdktrace.Sampler
	// Metrics, when set, is fed by the same hooks as the spans, so that
	// kernel.Options{Tracer: t} is all the wiring needed for both.
	Metrics *Metrics
	// IncludeContent records a call's input and its error text on its span.
	// Off by default; inputs labelled sensitive, and calls of nodes
	// declared sensitive, are never recorded. It needs Redact.
	IncludeContent bool
	// Redact scrubs every content string before it is recorded, for
	// example (*secrets.Redactor).Redact. Required with IncludeContent.
	Redact func(string) string
}

// Tracer implements kernel.Tracer: one span per run and one per node or
// tool call, and the matching metrics. It is safe for concurrent use.
type Tracer struct {
	tp      *sdktrace.TracerProvider // nil when nothing is exported
	tracer  trace.Tracer
	metrics *Metrics
	content bool
	redact  func(string) string
}

// New returns a Tracer. Call Shutdown when done, to flush what is buffered.
func New(opts *Options) (*Tracer, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.IncludeContent && o.Redact == nil {
		return nil, errors.New("telemetry: include content needs a redact function")
	}
	t := &Tracer{metrics: o.Metrics, content: o.IncludeContent, redact: o.Redact}
	exp := o.Exporter
	if exp == nil && o.OTLPEndpoint != "" {
		var err error
		if exp, err = otlpExporter(o.OTLPEndpoint, o.OTLPHeaders); err != nil {
			return nil, err
		}
	}
	if exp == nil {
		t.tracer = noop.NewTracerProvider().Tracer("")
		return t, nil
	}
	name := o.ServiceName
	if name == "" {
		name = "babel"
	}
	sampler := o.Sampler
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	)
	t.tracer = t.tp.Tracer("github.com/babelagent/babel/telemetry")
	return t, nil
}

func otlpExporter(endpoint string, headers map[string]string) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("telemetry: otlp endpoint %q: want an http or https URL", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(u.String()),
		otlptracehttp.WithTimeout(10 * time.Second),
	}
	if len(headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(maps.Clone(headers)))
	}
	// The HTTP exporter connects lazily: this does no I/O.
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
	}
	return exp, nil
}

// ForceFlush exports every span ended so far.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Shutdown flushes the spans still buffered and stops exporting; spans
// started afterwards are dropped. It returns when ctx is done at the latest.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// StartRun begins a run's span; end records its final status.
func (t *Tracer) StartRun(ctx context.Context, r *kernel.Run) (context.Context, func(status string)) {
	if t == nil {
		return ctx, func(string) {}
	}
	start := time.Now()
	t.metrics.runStarted()
	ctx, span := t.tracer.Start(ctx, SpanRun, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(runAttrs(r, nil)...))
	var ended atomic.Bool
	return ctx, func(status string) {
		if !ended.CompareAndSwap(false, true) {
			return
		}
		t.metrics.runFinished(status, time.Since(start))
		span.SetAttributes(attribute.String(AttrRunStatus, status))
		if runFailed(status) {
			span.SetStatus(codes.Error, status)
		}
		span.End()
	}
}

// runFailed reports whether a run status (package run's) is a failure.
// Cancelled and awaiting_approval are outcomes someone chose, not faults.
func runFailed(status string) bool {
	switch status {
	case "failed", "denied", "limit_exceeded":
		return true
	}
	return false
}

func runAttrs(r *kernel.Run, into []attribute.KeyValue) []attribute.KeyValue {
	if r == nil {
		return into
	}
	into = append(into,
		attribute.String(AttrRunID, r.ID),
		attribute.String(AttrRootRunID, r.RootID),
		attribute.String(AttrGraph, r.Graph),
		attribute.String(AttrPrincipal, r.Principal),
	)
	if r.ParentID != "" {
		into = append(into, attribute.String(AttrParentRunID, r.ParentID))
	}
	return into
}

// StartCall begins a node or tool call's span; end records how it ended.
func (t *Tracer) StartCall(ctx context.Context, c *kernel.Call) (context.Context, func(err error)) {
	if t == nil || c == nil {
		return ctx, func(error) {}
	}
	start := time.Now()
	adapter := "unknown"
	attrs := runAttrs(c.Run, make([]attribute.KeyValue, 0, 16))
	attrs = append(attrs, attribute.Int(AttrAttempt, c.Attempt))
	if n := c.Node; n != nil {
		if n.Card.Kind != "" {
			adapter = n.Card.Kind
		}
		effects := make([]string, 0, len(n.Card.Effects))
		for _, e := range n.Card.Effects {
			effects = append(effects, string(e))
		}
		if len(effects) == 0 {
			effects = append(effects, string(agent.EffectNone))
		}
		attrs = append(attrs,
			attribute.String(AttrNode, n.Name),
			attribute.String(AttrAgent, n.Card.Name),
			attribute.StringSlice(AttrEffects, effects),
		)
	}
	attrs = append(attrs, attribute.String(AttrAdapter, adapter))
	if p := c.Parent; p != nil && p.Node != nil {
		attrs = append(attrs, attribute.String(AttrCallKind, "tool"), attribute.String(AttrToolParent, p.Node.Name))
	} else {
		attrs = append(attrs, attribute.String(AttrCallKind, "node"))
	}
	if names := c.Input.Labels.Names(); len(names) > 0 {
		attrs = append(attrs, attribute.StringSlice(AttrInputLabels, names))
	}
	ctx, span := t.tracer.Start(ctx, SpanCall, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	private := c.Input.Labels.Has(agent.Sensitive) || (c.Node != nil && c.Node.Sensitive)
	if t.content && !private && span.IsRecording() {
		if v, err := c.Input.Value(); err == nil {
			span.SetAttributes(attribute.String(AttrInput, t.scrub(string(v))))
		}
	}
	var ended atomic.Bool
	return ctx, func(err error) {
		if !ended.CompareAndSwap(false, true) {
			return
		}
		class := errorClass(err)
		t.metrics.callFinished(adapter, class, time.Since(start))
		if err == nil {
			span.SetAttributes(attribute.String(AttrCallStatus, "ok"))
			span.End()
			return
		}
		span.SetAttributes(attribute.String(AttrCallStatus, "error"), attribute.String(AttrErrorType, class))
		desc := class
		if t.content && !private {
			desc = t.scrub(err.Error())
			span.AddEvent("exception", trace.WithAttributes(
				attribute.String("exception.type", class),
				attribute.String("exception.message", desc),
			))
		}
		span.SetStatus(codes.Error, desc)
		span.End()
	}
}

// scrub redacts s and bounds its length. s is cut before redaction too, so
// a huge input costs little; a secret split by that first cut lies past
// the final bound and is cut away again.
func (t *Tracer) scrub(s string) string {
	s = cut(s, 16*maxContent)
	return cut(t.redact(s), maxContent)
}

// cut shortens s to at most n bytes without splitting a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// errorClass names the kind of a call's failure without its text: the
// error.type of a span and the outcome label of a metric. It is "ok" for
// nil, and never holds anything from the error's message.
func errorClass(err error) string {
	var (
		denied  *kernel.DeniedError
		limit   *kernel.LimitError
		pending *kernel.ApprovalPendingError
		aud     *kernel.AuditError
		input   *agent.InputError
		panicE  *agent.PanicError
		peer    *agent.PeerError
		timeout interface{ Timeout() bool }
	)
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &denied):
		return "denied"
	case errors.As(err, &pending):
		return "approval_pending"
	case errors.As(err, &limit):
		return "limit"
	case errors.As(err, &aud):
		return "audit"
	case errors.As(err, &input):
		return "input"
	case errors.As(err, &panicE):
		return "panic"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &peer):
		return "peer"
	case errors.As(err, &timeout) && timeout.Timeout():
		return "timeout"
	}
	// Classes come from types, never from text: an unknown error is "error".
	return "error"
}

var _ kernel.Tracer = (*Tracer)(nil)
