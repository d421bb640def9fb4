package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
)

// Reasons of hook errors, used in metrics, Events and status conditions.
const (
	// ReasonTimeout: the hook did not answer within its timeout.
	ReasonTimeout = "Timeout"
	// ReasonUnavailable: the connection failed (refused, reset, TLS).
	ReasonUnavailable = "Unavailable"
	// ReasonHTTPStatus: the hook answered with a status other than 200
	// (and other than 304/412 with a cached ETag).
	ReasonHTTPStatus = "HTTPStatus"
	// ReasonInvalidResponse: the body is not valid JSON of the response
	// type, or (strict mode) has unknown or duplicated fields, or it is
	// over the manager's Limits, or a webhook answered with a redirect.
	ReasonInvalidResponse = "InvalidResponse"
	// ReasonConfig: the hook spec or a credential it names is unusable.
	ReasonConfig = "Config"
	// ReasonEvaluation: an inline pipeline failed to evaluate.
	ReasonEvaluation = "Evaluation"
)

// DefaultTimeout is the timeout of a webhook that sets none.
const DefaultTimeout = 10 * time.Second

// Error is a failed hook call.
type Error struct {
	// Hook is the spec path of the hook, e.g. spec.hooks.sync.
	Hook string
	// Reason is one of the Reason constants.
	Reason string
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %v", e.Hook, e.Reason, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the reason of a hook error, or "" for other errors.
func ReasonOf(err error) string {
	var he *Error
	if errors.As(err, &he) {
		return he.Reason
	}
	return ""
}

// Caller calls one hook: it sends request (a hookapi request, encoded as
// JSON) and decodes the answer into response (a pointer to the matching
// hookapi response). cacheKey identifies the parent for the ETag cache
// (use the parent's UID); it may be empty. Errors are *Error.
type Caller interface {
	Call(ctx context.Context, cacheKey string, request, response any) error
}

// Options configure New.
type Options struct {
	// Controller names the controller in metrics: "<kind>/<name>", e.g.
	// "compositecontroller/podservice".
	Controller string
	// Hook is the hook's name in metrics: sync, finalize or customize.
	Hook string
	// Path is the spec path of the hook in errors, e.g. spec.hooks.sync.
	Path string
	// EndpointConfigs are the controller's per-host connection settings.
	EndpointConfigs []mcv1a1.EndpointConfig
	// Reader reads the Secrets and ConfigMaps that credentials name
	// (typically the manager's API reader, so that no cluster-wide Secret
	// informer is started). May be nil when no hook names one.
	Reader client.Reader
	// Limits bound what one answer may hold (zero fields: the defaults).
	Limits Limits
}

// New returns the Caller of spec, or nil when spec is nil. Errors (a hook
// with neither or both of webhook and pipeline, an invalid URL or
// expression, conflicting credentials) carry the spec path.
func New(spec *mcv1a1.Hook, opts Options) (Caller, error) {
	if spec == nil {
		return nil, nil
	}
	version := mcv1a1.HookVersionV1
	if spec.Version != nil && *spec.Version != "" {
		version = *spec.Version
	}
	switch {
	case spec.Webhook != nil && spec.Pipeline != nil:
		return nil, fmt.Errorf("%s: set either webhook or pipeline, not both", opts.Path)
	case spec.Webhook != nil:
		return newWebhook(spec.Webhook, version, opts)
	case spec.Pipeline != nil:
		return newPipeline(spec.Pipeline.Raw, version, opts)
	default:
		return nil, fmt.Errorf("%s: set webhook or pipeline", opts.Path)
	}
}

// pipeline is an inline expression hook.
type pipeline struct {
	expr   expression.Expression
	strict bool
	opts   Options
}

func newPipeline(raw []byte, version mcv1a1.HookVersion, opts Options) (*pipeline, error) {
	path := opts.Path + ".pipeline"
	var spec any
	// Numbers stay json.Number: an integer literal stays an integer.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	e, err := expression.Parse(spec, path)
	if err != nil {
		return nil, err
	}
	return &pipeline{expr: e, strict: hookapi.StrictByDefault(version), opts: opts}, nil
}

// Call evaluates the expression with the JSON form of request as `$` and
// decodes its value as the response.
func (p *pipeline) Call(_ context.Context, _ string, request, response any) (err error) {
	start := time.Now()
	callsTotal.WithLabelValues(p.opts.Controller, p.opts.Hook).Inc()
	defer func() {
		duration.WithLabelValues(p.opts.Controller, p.opts.Hook, "pipeline").Observe(time.Since(start).Seconds())
		if err != nil {
			errorsTotal.WithLabelValues(p.opts.Controller, p.opts.Hook, ReasonOf(err)).Inc()
		}
	}()
	fail := func(reason string, err error) error {
		return &Error{Hook: p.opts.Path, Reason: reason, Err: err}
	}
	b, err := encodeRequest(request)
	if err != nil {
		return fail(ReasonEvaluation, err)
	}
	// The subject holds the request as a webhook reads it, integers as
	// int64 (as an Operator's pipeline sees its sources): 2^53+1 stays.
	var subject any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &subject); err != nil {
		return fail(ReasonEvaluation, err)
	}
	out, err := expression.Eval(p.expr, subject)
	if err != nil {
		return fail(ReasonEvaluation, err)
	}
	if _, ok := out.(map[string]any); !ok {
		return fail(ReasonInvalidResponse, fmt.Errorf("the pipeline produced %T, want an object", out))
	}
	b, err = json.Marshal(out)
	if err != nil {
		return fail(ReasonInvalidResponse, err)
	}
	if err := p.opts.Limits.Check(b); err != nil {
		return fail(ReasonInvalidResponse, fmt.Errorf("the answer is over the manager's hook limits: %w", err))
	}
	if err := hookapi.Decode(b, p.strict, response); err != nil {
		return fail(ReasonInvalidResponse, err)
	}
	return nil
}
