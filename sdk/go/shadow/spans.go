package shadow

// The spans of the operations: started for each step, carrying its outcome, its conflicts and
// the write differences of a paired run (the convention of docs/ingest.md; names in
// attributes.go).

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/writes"
)

// stepSpan is an operation's span, ended by close once what it carries is known: the write
// differences of a paired run are known only after the control's code of the operation ran, so
// the span keeps its own end time.
type stepSpan struct {
	span trace.Span
	end  time.Time
}

// ReevaluatedAttribute is on every candidate dry-run operation span: whether the run
// re-evaluates a step the control failed on a 409 Conflict (a dry run under the candidate's
// retry, or the candidate's own code of the operation, paired). Only those runs answer whether
// the candidate would have succeeded where the control met a 409, whatever their own attempts
// met; the sidecar counts no other run (a sampled re-execution, an unblocked step) in the
// conflict resolutions.
const ReevaluatedAttribute = attrReevaluated

// reevaluates says on a candidate's dry-run span whether it re-evaluates a control 409.
func (s stepSpan) reevaluates(yes bool) {
	if s.span != nil && s.span.IsRecording() {
		s.span.SetAttributes(attribute.Bool(ReevaluatedAttribute, yes))
	}
}

// close puts one event per write difference on the span and ends it, both at its end time.
func (s stepSpan) close(differences []writes.WriteDifference) {
	if s.span == nil {
		return
	}
	if len(differences) > 0 && s.span.IsRecording() {
		addDifferences(s.span, differences, trace.WithTimestamp(s.end))
	}
	s.span.End(trace.WithTimestamp(s.end))
}

// startSpan starts an operation's span: a direct child of the reconcile span, as the span
// convention wants. It says `succeeded` from the start: reportOutcome sets another outcome
// only when there is one (the SDK keeps the last value of a key), so the common span takes its
// attributes in one allocation instead of growing them when it ends.
func (e *Engine[T, S]) startSpan(ctx context.Context, op int, policy string, execution Execution, options ...trace.SpanStartOption) (context.Context, trace.Span) {
	name := e.plan.Operations[op].Name
	return e.tracer.Start(ctx, name, append([]trace.SpanStartOption{trace.WithAttributes(
		attribute.String(attrOperation, name),
		attribute.String(attrPolicy, policy),
		attribute.String(attrExecution, string(execution)),
		attribute.String(attrOutcome, "succeeded"),
	)}, options...)...)
}

// reportOutcome sets an operation span's outcome (failed, with its class, status code and error
// status; idle when it had nothing to do; else succeeded, as startSpan said), its conflicts and
// whether it ran under retry-on-conflict.
func reportOutcome(span trace.Span, err error, idle bool, conflicts int, retried bool) {
	if !span.IsRecording() || (err == nil && !idle && conflicts == 0 && !retried) {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	if err != nil {
		attrs = append(attrs, attribute.String(attrOutcome, "failed"), attribute.String(attrErrorType, Classify(err)))
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			attrs = append(attrs, attribute.Int(attrK8sStatusCode, int(status.Status().Code)),
				attribute.String(attrK8sStatusReason, string(status.Status().Reason)))
		}
		span.SetStatus(codes.Error, err.Error())
	} else if idle {
		attrs = append(attrs, attribute.String(attrOutcome, string(model.Idle)))
	}
	if conflicts > 0 {
		attrs = append(attrs, attribute.Int(attrConflicts, conflicts))
	}
	if retried {
		attrs = append(attrs, attribute.Bool(attrRetried, true))
	}
	span.SetAttributes(attrs...)
}
