package shadow

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
)

func TestPausesDoubleInARowAndResetAfterAQuietSpell(t *testing.T) {
	var p pressure
	t0 := time.Now()
	if got := p.signal(reasonShadowThrottled, t0, 0); got != time.Second {
		t.Fatalf("first pause %v", got)
	}
	if !p.pausedAt(t0.Add(999*time.Millisecond)) || p.pausedAt(t0.Add(time.Second)) {
		t.Error("the pause is not 1 s long")
	}
	if got := p.signal(reasonShadowThrottled, t0.Add(500*time.Millisecond), 0); got != 0 {
		t.Errorf("a signal during a pause lengthened it by %v", got)
	}
	// Right after it ended: 2 s, then 4 s; a Retry-After longer than that is honoured.
	if got := p.signal(reasonShadowThrottled, t0.Add(1500*time.Millisecond), 0); got != 2*time.Second {
		t.Errorf("second pause %v", got)
	}
	if got := p.signal(reasonShadowThrottled, t0.Add(4*time.Second), 0); got != 4*time.Second {
		t.Errorf("third pause %v", got)
	}
	if got := p.signal(reasonShadowThrottled, t0.Add(9*time.Second), 30*time.Second); got != 30*time.Second {
		t.Errorf("Retry-After 30 s: %v", got)
	}
	// Quiet for longer than the last pause after it ended: back to 1 s.
	if got := p.signal(reasonShadowThrottled, t0.Add(2*time.Minute), 0); got != time.Second {
		t.Errorf("after a quiet spell %v", got)
	}
	if got := p.signal(reasonShadowThrottled, t0.Add(time.Hour), time.Hour); got != pauseMax {
		t.Errorf("Retry-After of an hour: %v, want the longest pause", got)
	}
	if p.pauses.Load() != 6 {
		t.Errorf("%d pauses", p.pauses.Load())
	}
}

func TestTheControlSlowingDownPausesAndJitterDoesNot(t *testing.T) {
	var p pressure
	t0 := time.Now()
	feed := func(ms ...int) time.Duration {
		var paused time.Duration
		for len(ms) < latencyWindow {
			ms = append(ms, ms[len(ms)-1])
		}
		for _, l := range ms {
			if d := p.controlLatency(t0, time.Duration(l)*time.Millisecond); d != 0 {
				paused = d
			}
		}
		return paused
	}
	if feed(10) != 0 || feed(60) != 0 {
		t.Error("a window within the floor paused the shadow")
	}
	if feed(500) != time.Second || !p.pausedAt(t0) {
		t.Error("a window of 500 ms against a baseline of 20 did not pause the shadow")
	}
}

// A paused shadow: the control runs exactly as with the shadow off, the skip said as paused.
func TestAPausedShadowLeavesTheControlAsWithTheShadowOff(t *testing.T) {
	offSpec := flag.Default()
	offSpec.Mode = flag.Off
	off := newHarness(t, "hostedcluster", staticFlag(t, offSpec, "hostedcluster"))
	off.fail["SSHKeySync"] = notFound("hc-0-ssh-key")
	offOut := off.reconcile()

	budget := pausing(t)
	budget.p.signal(reasonShadowThrottled, time.Now(), time.Hour) // paused for five minutes: all through the test
	h := newHarness(t, "hostedcluster", nil)
	h.dry.budget = budget
	h.fail["SSHKeySync"] = notFound("hc-0-ssh-key")
	out := h.reconcile()
	if out.ComparisonSkipped != SkipPaused || out.Candidate != nil || out.DryRunRequests != 0 {
		t.Fatalf("skipped %q, candidate %v, %d dry runs", out.ComparisonSkipped, out.Candidate != nil, out.DryRunRequests)
	}
	if !maps.EqualFunc(h.calls, off.calls, slices.Equal) {
		t.Errorf("the control's calls differ from shadow off:\n%v\n%v", h.calls, off.calls)
	}
	if out.Err == nil || offOut.Err == nil || out.Err.Error() != offOut.Err.Error() {
		t.Errorf("errors: %v, off: %v", out.Err, offOut.Err)
	}
	if budget.PausedRefusals() != 1 || budget.Sent() != 0 {
		t.Errorf("paused refusals %d, sent %d", budget.PausedRefusals(), budget.Sent())
	}
}

// A 429 to a shadow request pauses the shadow and is not retried by client-go (its Retry-After
// is dropped): the shadow steps aside at once. A 429 to a routed control request, retried by
// client-go as usual, pauses the shadow too.
func TestA429PausesTheShadow(t *testing.T) {
	var requests atomic.Int64
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n := requests.Add(1); n > 2 { // the first two: the shadow's, then the control's
			_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns"}}`))
			return
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`))
	}))
	defer server.Close()
	budget := pausing(t)
	dry, err := NewDryRunConfig(&rest.Config{Host: server.URL}, WithBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	candidate, err := kubernetes.NewForConfig(dry.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = candidate.CoreV1().ConfigMaps("ns").Get(ctx, "x", metav1.GetOptions{})
	if !apierrors.IsTooManyRequests(err) || requests.Load() != 1 {
		t.Fatalf("the shadow's 429: %v after %d requests (want one, not retried)", err, requests.Load())
	}
	if !budget.Paused() || budget.Pauses() != 1 {
		t.Fatalf("paused %v, %d pauses", budget.Paused(), budget.Pauses())
	}

	// The control's 429, on a routed config: client-go retries it after its Retry-After, as
	// it would without the shadow, and the shadow of that config paused on it (for the 1 s the
	// retry waited).
	quiet := pausing(t)
	dry2, err := NewDryRunConfig(&rest.Config{Host: server.URL}, WithBudget(quiet))
	if err != nil {
		t.Fatal(err)
	}
	routed, err := dry2.Routed(&rest.Config{Host: server.URL})
	if err != nil {
		t.Fatal(err)
	}
	control, err := kubernetes.NewForConfig(routed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := control.CoreV1().ConfigMaps("ns").Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Fatalf("the control's request, retried: %v", err)
	}
	if requests.Load() != 3 || quiet.Pauses() != 1 {
		t.Fatalf("%d requests, %d pauses", requests.Load(), quiet.Pauses())
	}
}

// pausing is a budget that never runs out in a test and pauses under load.
func pausing(t *testing.T) *Budget {
	t.Helper()
	b, err := NewBudget(1e6, 1e6)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAnUnlimitedBudgetNeverPauses(t *testing.T) {
	b := UnlimitedBudget()
	if b.p.signal(reasonShadowThrottled, time.Now(), 0) != 0 || b.Paused() || b.Pauses() != 0 {
		t.Error("an unlimited budget paused")
	}
}

// Each pause begun is counted by its reason in controller-runtime's registry; a signal during a
// pause, or to a budget that never pauses, counts nothing.
func TestPausesAreCountedByReasonInTheManagersMetrics(t *testing.T) {
	count := func(reason string) float64 { return testutil.ToFloat64(shadowPauses.WithLabelValues(reason)) }
	before := map[string]float64{}
	for _, r := range []string{reasonShadowThrottled, reasonControlThrottled, reasonControlSlow} {
		before[r] = count(r)
	}
	var p pressure
	t0 := time.Now()
	p.signal(reasonShadowThrottled, t0, 0)
	p.signal(reasonControlThrottled, t0.Add(100*time.Millisecond), 0) // during the pause
	p.signal(reasonControlThrottled, t0.Add(time.Minute), 0)
	// A window of fast requests makes the baseline, then a slow one pauses.
	later := t0.Add(time.Hour)
	for range latencyWindow {
		p.controlLatency(later, time.Millisecond)
	}
	for range latencyWindow {
		p.controlLatency(later, time.Second)
	}
	(&pressure{disabled: true}).signal(reasonShadowThrottled, t0, 0)
	want := map[string]float64{reasonShadowThrottled: 1, reasonControlThrottled: 1, reasonControlSlow: 1}
	for r, n := range want {
		if got := count(r) - before[r]; got != n {
			t.Errorf("%s: %v pauses counted, want %v", r, got, n)
		}
	}
	if err := crmetrics.Registry.Register(shadowPauses); err == nil {
		t.Error("the counter is not in controller-runtime's registry")
	}
}
