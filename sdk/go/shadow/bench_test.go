package shadow

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
)

// The engine's own cost per reconcile of the hostedcluster plan (22 operations): the models, the
// flag, the spans (recorded by the SDK into an in-memory exporter through a batcher, as in
// production), with operations that do nothing. Figures: docs/performance.md.
func benchmarkReconcile(b *testing.B, mode flag.Mode, failing string, traced bool) {
	p := shipped(&testing.T{}, "hostedcluster")
	exporter := tracetest.NewNoopExporter()
	tp := trace.NewTracerProvider(trace.WithBatcher(exporter))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	real := fake.NewClientBuilder().Build()
	ops := map[string]Op[*corev1.Secret, struct{}]{}
	fail := errors.New("missing input")
	for _, op := range p.Operations {
		name := op.Name
		ops[name] = func(context.Context, *Run[*corev1.Secret, struct{}]) error {
			if name == failing {
				return fail
			}
			return nil
		}
	}
	spec := flag.Default()
	spec.Mode = mode
	f, err := StaticFlag(spec, p)
	if err != nil {
		b.Fatal(err)
	}
	tracer := tp.Tracer("bench")
	if !traced {
		tracer = noop.NewTracerProvider().Tracer("bench")
	}
	e, err := New(p, real, ops, Options{Flag: f, DryRun: &DryRun{dry: real, stats: &GuardStats{}}, Tracer: tracer})
	if err != nil {
		b.Fatal(err)
	}
	object := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hc", UID: "u"}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	before := processCPU(b)
	for b.Loop() {
		e.Reconcile(ctx, object)
	}
	// The process's CPU (the span batcher's goroutine and the collector included), which the
	// other core's load does not stretch as it does wall time.
	b.ReportMetric(float64((processCPU(b)-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		b.Fatal(err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

func BenchmarkReconcileOff(b *testing.B)    { benchmarkReconcile(b, flag.Off, "", true) }
func BenchmarkReconcileShadow(b *testing.B) { benchmarkReconcile(b, flag.Shadow, "", true) }

// A failure early in the legacy order: the candidate dry-runs what the control skipped.
func BenchmarkReconcileShadowFailing(b *testing.B) {
	benchmarkReconcile(b, flag.Shadow, "SSHKeySync", true)
}

// The models and the flag alone: spans to a no-op tracer.
func BenchmarkReconcileShadowUntraced(b *testing.B) { benchmarkReconcile(b, flag.Shadow, "", false) }

// The same without the shadow: what the untraced shadow adds to it is the models' and the diff's.
func BenchmarkReconcileOffUntraced(b *testing.B) { benchmarkReconcile(b, flag.Off, "", false) }
