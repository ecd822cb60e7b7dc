// Package tracing exports the traces of turns over OTLP/HTTP to the collector the operator
// names ([tracing] endpoint, or the standard OTEL_EXPORTER_OTLP_* variables): one trace per
// turn, its root span the turn with its run id and folder, its children the wait in the
// queue, the preparation, the sidecars, the container's create, start and run, each model
// request, each MCP tool call and each egress connection. It owns the OpenTelemetry SDK
// (no other package imports it) and what the spans are named and carry. It must not touch
// the store, engines or files: it is handed what happened, through Turn's methods.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of a turn's spans. The run id and folder mean what the journal fields
// logging.FieldRunID and logging.FieldFolder mean.
const (
	AttrRunID     = "arizuko.run_id"
	AttrFolder    = "arizuko.folder"
	AttrTaskID    = "arizuko.task_id"
	AttrContainer = "arizuko.container"
	AttrAdopted   = "arizuko.adopted"
	AttrStatus    = "arizuko.status"
	AttrFailure   = "arizuko.failure"
	AttrExitCode  = "arizuko.exit_code"
	AttrSidecars  = "arizuko.sidecars"
	AttrTool      = "arizuko.tool"
	AttrOutcome   = "arizuko.outcome"
	AttrRefused   = "arizuko.refused"
	AttrBytesUp   = "arizuko.bytes_up"
	AttrBytesDown = "arizuko.bytes_down"
	AttrTTFBMS    = "arizuko.ttfb_ms"
	// The model request's, named as OpenTelemetry's conventions for generative AI and
	// HTTP name them.
	AttrModel            = "gen_ai.request.model"
	AttrInputTokens      = "gen_ai.usage.input_tokens"
	AttrOutputTokens     = "gen_ai.usage.output_tokens"
	AttrCacheReadTokens  = "gen_ai.usage.cache_read_input_tokens"
	AttrCacheWriteTokens = "gen_ai.usage.cache_creation_input_tokens"
	AttrHTTPStatus       = "http.response.status_code"
	AttrURLPath          = "url.path"
	AttrServerAddress    = "server.address"
)

// The names of a turn's spans.
const (
	SpanTurn         = "turn"
	SpanQueueWait    = "queue.wait"
	SpanPrepare      = "turn.prepare"
	SpanSidecars     = "sidecars.start"
	SpanCreate       = "container.create"
	SpanStart        = "container.start"
	SpanRun          = "container.run"
	SpanFinish       = "turn.finish"
	SpanModelRequest = "model.request"
	SpanToolCall     = "mcp.tool"
	SpanEgress       = "egress"
)

// ErrEndpoint is a [tracing] endpoint that is no http(s) URL.
var ErrEndpoint = errors.New("not an http:// or https:// URL with a host")

// Config is the [tracing] section.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP base URL (http://host:4318), to which
	// /v1/traces is added, or the full URL of its traces when it has a path. Empty:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, or no tracing.
	Endpoint string
	// Instance and Version name the daemon in the traces' resource (service.instance.id,
	// service.version).
	Instance string
	Version  string
	// OnError hears what the exporter could not do (a collector that does not answer);
	// nil leaves OpenTelemetry's default, a line on stderr.
	OnError func(error)
}

// CheckEndpoint says whether e may be a [tracing] endpoint.
func CheckEndpoint(e string) error {
	if e == "" {
		return nil
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: %w", e, ErrEndpoint)
	}
	return nil
}

// Enabled says whether c, with the process environment, turns tracing on: an endpoint in
// the configuration or in OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, unless OTEL_SDK_DISABLED
// is true or OTEL_TRACES_EXPORTER is none.
func (c Config) Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Tracer makes the traces of turns and exports them in batches. A nil *Tracer traces
// nothing, at no cost.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New starts the exporter c names; it is nil, nil when tracing is off (Config.Enabled).
// The other settings of the exporter (headers, timeout, compression, certificates: the
// OTEL_EXPORTER_OTLP_(TRACES_)* variables, a wrong one an error naming it) and of the
// batches (OTEL_BSP_*) come from the standard variables; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES add to the resource.
func New(ctx context.Context, c Config) (*Tracer, error) {
	if !c.Enabled() {
		return nil, nil
	}
	if c.OnError != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(c.OnError))
	}
	cl, err := newClient(c.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	exp, err := otlptrace.New(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "arizukod")}
	if c.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", c.Instance))
	}
	if c.Version != "" {
		attrs = append(attrs, attribute.String("service.version", c.Version))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracer{tp: tp, tracer: tp.Tracer("github.com/arizuko/arizukod")}, nil
}

// tracesURL is the URL the spans are posted to: e's path, or /v1/traces when it has none.
func tracesURL(e string) string {
	u, err := url.Parse(e)
	if err != nil || strings.Trim(u.Path, "/") != "" {
		return e
	}
	u.Path = "/v1/traces"
	return u.String()
}

// Flush exports every span ended so far.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Shutdown exports what is left and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}
