package tracing

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TurnStart is what a turn's trace starts with.
type TurnStart struct {
	RunID  string
	Folder string
	TaskID string
	// Queued, when set, is when the run was queued: the trace begins then, with the wait
	// in the queue until Picked (the queue's start of the run) as a span.
	Queued, Picked time.Time
	Adopted        bool
}

// Turn is the trace of one turn: its root span, open until End. Its methods may be called
// from any goroutine; on a nil *Turn they do nothing.
type Turn struct {
	ctx    context.Context // carries the root span: the parent of every other
	root   trace.Span
	tracer trace.Tracer
}

// StartTurn opens the trace of one turn.
func (t *Tracer) StartTurn(ctx context.Context, s TurnStart) *Turn {
	if t == nil {
		return nil
	}
	attrs := []attribute.KeyValue{attribute.String(AttrRunID, s.RunID), attribute.String(AttrFolder, s.Folder)}
	if s.TaskID != "" {
		attrs = append(attrs, attribute.String(AttrTaskID, s.TaskID))
	}
	if s.Adopted {
		attrs = append(attrs, attribute.Bool(AttrAdopted, true))
	}
	begin := time.Now()
	queued := !s.Queued.IsZero() && !s.Picked.IsZero() && !s.Adopted && !s.Queued.After(s.Picked)
	if queued {
		begin = s.Queued
	}
	// A turn is a trace of its own, whatever ctx carries.
	ctx, root := t.tracer.Start(ctx, SpanTurn, trace.WithNewRoot(), trace.WithTimestamp(begin),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindServer))
	tt := &Turn{ctx: ctx, root: root, tracer: t.tracer}
	if queued {
		tt.Phase(SpanQueueWait, s.Queued, s.Picked, nil)
	}
	return tt
}

// span records a child of the root span that ran from start to end.
func (tt *Turn) span(name string, kind trace.SpanKind, start, end time.Time, err string, attrs ...attribute.KeyValue) {
	_, s := tt.tracer.Start(tt.ctx, name,
		trace.WithTimestamp(start), trace.WithAttributes(attrs...), trace.WithSpanKind(kind))
	if err != "" {
		s.SetStatus(codes.Error, err)
	}
	s.End(trace.WithTimestamp(end))
}

// Phase records a part of the turn that ran from start to end; a non-nil err failed it.
func (tt *Turn) Phase(name string, start, end time.Time, err error, attrs ...attribute.KeyValue) {
	if tt == nil {
		return
	}
	var msg string
	if err != nil {
		msg = err.Error()
	}
	tt.span(name, trace.SpanKindInternal, start, end, msg, attrs...)
}

// Sidecars records the start of the turn's n sidecars.
func (tt *Turn) Sidecars(n int, start, end time.Time, err error) {
	if tt == nil {
		return
	}
	tt.Phase(SpanSidecars, start, end, err, attribute.Int(AttrSidecars, n))
}

// ModelRequest is one request of the agent through the model gateway.
type ModelRequest struct {
	Path  string
	Model string
	// Status is the HTTP status the agent got; 0 when it got none.
	Status int
	// Start is when the request came; FirstByte when the answer's first byte went back
	// (zero when none did); End when the answer was over.
	Start, FirstByte, End time.Time
	InputTokens           int64
	OutputTokens          int64
	CacheReadTokens       int64
	CacheWriteTokens      int64
	// Refused is why the gateway refused it; UpstreamError how the upstream failed.
	Refused, UpstreamError string
}

// Model records one model request.
func (tt *Turn) Model(r ModelRequest) {
	if tt == nil {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrURLPath, r.Path), attribute.Int(AttrHTTPStatus, r.Status),
		attribute.Int64(AttrInputTokens, r.InputTokens), attribute.Int64(AttrOutputTokens, r.OutputTokens),
		attribute.Int64(AttrCacheReadTokens, r.CacheReadTokens), attribute.Int64(AttrCacheWriteTokens, r.CacheWriteTokens),
	}
	if r.Model != "" {
		attrs = append(attrs, attribute.String(AttrModel, r.Model))
	}
	if !r.FirstByte.IsZero() {
		attrs = append(attrs, attribute.Int64(AttrTTFBMS, r.FirstByte.Sub(r.Start).Milliseconds()))
	}
	if r.Refused != "" {
		attrs = append(attrs, attribute.String(AttrRefused, r.Refused))
	}
	msg := r.Refused
	switch {
	case r.UpstreamError != "":
		msg = r.UpstreamError
	case msg == "" && r.Status >= 400:
		msg = "status " + strconv.Itoa(r.Status)
	}
	tt.span(SpanModelRequest, trace.SpanKindClient, r.Start, r.End, msg, attrs...)
}

// ToolCall records one MCP tool call and its outcome ("ok", or what refused or failed it).
func (tt *Turn) ToolCall(tool, outcome string, start, end time.Time) {
	if tt == nil {
		return
	}
	var msg string
	if outcome != "ok" {
		msg = outcome
	}
	tt.span(SpanToolCall, trace.SpanKindServer, start, end, msg,
		attribute.String(AttrTool, tool), attribute.String(AttrOutcome, outcome))
}

// Egress records one connection through the egress proxy, or its refusal.
func (tt *Turn) Egress(destination string, start, end time.Time, up, down int64, refused bool) {
	if tt == nil {
		return
	}
	var msg string
	if refused {
		msg = "refused"
	}
	tt.span(SpanEgress, trace.SpanKindClient, start, end, msg,
		attribute.String(AttrServerAddress, destination), attribute.Int64(AttrBytesUp, up),
		attribute.Int64(AttrBytesDown, down), attribute.Bool(AttrRefused, refused))
}

// TurnEnd is how the turn ended.
type TurnEnd struct {
	Container string
	Status    string // ok, error, fatal
	Failure   string
	ExitCode  int
	// Err, when set, says why the turn failed: the root span gets the error status.
	Err error
}

// End closes the turn's trace with its outcome.
func (tt *Turn) End(e TurnEnd) {
	if tt == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String(AttrStatus, e.Status), attribute.Int(AttrExitCode, e.ExitCode)}
	if e.Container != "" {
		attrs = append(attrs, attribute.String(AttrContainer, e.Container))
	}
	if e.Failure != "" {
		attrs = append(attrs, attribute.String(AttrFailure, e.Failure))
	}
	tt.root.SetAttributes(attrs...)
	if e.Err != nil {
		tt.root.SetStatus(codes.Error, e.Err.Error())
	}
	tt.root.End()
}
