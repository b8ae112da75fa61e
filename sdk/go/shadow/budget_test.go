package shadow

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
)

// A comparison starts only with a token in the bucket; once started its requests take tokens
// into debt, and the next comparison waits until the refill has paid the debt back.
func TestABudgetRunsIntoDebtAndRefusesUntilRepaid(t *testing.T) {
	b, err := NewBudget(10, 5)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	b.at = now
	if !b.TryBegin() {
		t.Fatal("a full bucket refused")
	}
	for range 8 {
		b.Spend() // 5 tokens, then 3 of debt
	}
	if b.TryBegin() {
		t.Fatal("a bucket in debt let a comparison start")
	}
	now = now.Add(390 * time.Millisecond)
	if b.TryBegin() {
		t.Fatal("3.9 tokens of the 4 owed: still refused")
	}
	now = now.Add(10 * time.Millisecond)
	if !b.TryBegin() {
		t.Fatal("the debt is paid and a token is back")
	}
	if b.Sent() != 8 || b.Refused() != 2 {
		t.Fatalf("sent %d, refused %d", b.Sent(), b.Refused())
	}
	for _, bad := range []struct {
		qps   float64
		burst int
	}{{0, 1}, {-1, 1}, {1, 0}} {
		if _, err := NewBudget(bad.qps, bad.burst); err == nil {
			t.Errorf("NewBudget(%v, %d) accepted", bad.qps, bad.burst)
		}
	}
	if _, err := NewDryRunConfig(&rest.Config{Host: "http://127.0.0.1:1"}, WithBudget(nil)); err == nil {
		t.Error("WithBudget(nil) accepted")
	}
}

// A spent budget: the control runs exactly as with the shadow off (the same operations, the
// same outcome), the candidate runs nothing, and the skip is said in the outcome and the span.
func TestASpentBudgetLeavesTheControlAsWithTheShadowOff(t *testing.T) {
	offSpec := flag.Default()
	offSpec.Mode = flag.Off
	off := newHarness(t, "hostedcluster", staticFlag(t, offSpec, "hostedcluster"))
	off.fail["SSHKeySync"] = notFound("hc-0-ssh-key")
	offOut := off.reconcile()

	spent, err := NewBudget(0.001, 1) // a token again in 1000 s: none while the test runs
	if err != nil {
		t.Fatal(err)
	}
	spent.Spend()
	h := newHarness(t, "hostedcluster", nil)
	h.dry.budget = spent
	h.fail["SSHKeySync"] = notFound("hc-0-ssh-key")
	out := h.reconcile()

	if out.Mode != flag.Shadow || out.ComparisonSkipped != SkipBudget {
		t.Fatalf("mode %s, skipped %q", out.Mode, out.ComparisonSkipped)
	}
	if !maps.EqualFunc(h.calls, off.calls, slices.Equal) {
		t.Errorf("the control's calls differ from shadow off:\n%v\n%v", h.calls, off.calls)
	}
	if out.Err == nil || offOut.Err == nil || out.Err.Error() != offOut.Err.Error() {
		t.Errorf("errors: %v, off: %v", out.Err, offOut.Err)
	}
	if out.Candidate != nil || out.DryRunRequests != 0 || h.dry.Stats().DryRunRequests() != 0 {
		t.Errorf("the candidate ran: %v, %d dry runs", out.Candidate != nil, out.DryRunRequests)
	}
	if spent.Refused() != 1 || spent.Sent() != 1 {
		t.Errorf("refused %d, sent %d", spent.Refused(), spent.Sent())
	}
	var said bool
	for _, s := range h.spans.Ended() {
		for _, a := range s.Attributes() {
			if string(a.Key) == attrComparisonSkipped && a.Value.AsString() == "budget" {
				said = s.Name() == "reconcile"
			}
		}
	}
	if !said {
		t.Error("the reconcile span does not say the comparison was skipped")
	}
	// With a token, the same reconcile compares.
	h.dry.budget = UnlimitedBudget()
	if again := h.reconcile(); again.ComparisonSkipped != "" || again.Candidate == nil {
		t.Errorf("unlimited: skipped %q, candidate %v", again.ComparisonSkipped, again.Candidate != nil)
	}
}

// countingLimiter is a controller's client-side limiter that counts what it is asked and, when
// closed, makes every request wait until its context ends (the control's budget is spent).
type countingLimiter struct {
	waits  atomic.Int64
	closed bool
}

func (c *countingLimiter) TryAccept() bool { c.waits.Add(1); return !c.closed }
func (c *countingLimiter) Accept()         { c.waits.Add(1) }
func (c *countingLimiter) Stop()           {}
func (c *countingLimiter) QPS() float32    { return 1 }
func (c *countingLimiter) Wait(ctx context.Context) error {
	c.waits.Add(1)
	if c.closed {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// The candidate's requests never touch the controller's client-side limiter: through the
// dry-run config or a routed config, they spend the shadow's budget and never wait, even when
// the control's limiter is spent; the control's own requests still go through it.
func TestTheCandidateNeverSpendsTheControlsLimiter(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns"}}`))
	}))
	defer server.Close()
	control := &countingLimiter{}
	config := &rest.Config{Host: server.URL, RateLimiter: control}
	budget := UnlimitedBudget()
	dry, err := NewDryRunConfig(config, WithBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	patch := func(cs kubernetes.Interface, ctx context.Context) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := cs.CoreV1().ConfigMaps("ns").Patch(ctx, "x", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	candidate, err := kubernetes.NewForConfig(dry.Config())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		patch(candidate, context.Background())
	}
	if control.waits.Load() != 0 || budget.Sent() != 3 {
		t.Fatalf("the dry-run config: the control's limiter asked %d times, the budget spent %d", control.waits.Load(), budget.Sent())
	}

	routed, err := dry.Routed(config)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(routed)
	if err != nil {
		t.Fatal(err)
	}
	patch(cs, context.Background())
	if control.waits.Load() != 1 || budget.Sent() != 3 {
		t.Fatalf("a control request: the control's limiter asked %d times, the budget spent %d", control.waits.Load(), budget.Sent())
	}
	// The control's limiter is spent: a candidate request still goes, at once.
	control.closed = true
	run := newShadowRun(context.Background())
	patch(cs, run.ctx)
	if control.waits.Load() != 1 || budget.Sent() != 4 {
		t.Fatalf("a candidate request: the control's limiter asked %d times, the budget spent %d", control.waits.Load(), budget.Sent())
	}
	if run.local.DryRunRequests() != 1 {
		t.Errorf("the candidate's request was not a dry run: %d", run.local.DryRunRequests())
	}
}

func TestParseBudget(t *testing.T) {
	b, err := ParseBudget("2.5", 0)
	if err != nil || b.qps != 2.5 || b.burst != DefaultBudgetBurst {
		t.Fatalf("2.5: %+v %v", b, err)
	}
	if b, err = ParseBudget("unlimited", 0); err != nil || b.qps != 0 {
		t.Fatalf("unlimited: %+v %v", b, err)
	}
	for _, bad := range []struct {
		qps   string
		burst int
		says  string
	}{
		{"unlimited", 5, "--shadow-qps unlimited has none"},
		{"fast", 0, `--shadow-qps "fast" is not a rate`},
		{"0", 0, "positive number"},
		{"1", -1, "at least 1 request"},
	} {
		if _, err := ParseBudget(bad.qps, bad.burst); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("ParseBudget(%q, %d) = %v, want an error saying %q", bad.qps, bad.burst, err, bad.says)
		}
	}
}

// The paired sample: a stable share of the objects by UID, nested, drawn apart from the ramp;
// an object outside it runs its control alone when its comparison would pair code (counted
// sampled-out, nothing dry-run), one inside is compared; shared code is never sampled out.
func TestThePairedSampleBoundsTheComparisonsThatPairCode(t *testing.T) {
	b := UnlimitedBudget()
	if err := b.SetPairedSample(20); err != nil || b.PairedSample() != 20 {
		t.Fatalf("SetPairedSample(20): %v, %v", err, b.PairedSample())
	}
	for _, bad := range []float64{-1, 100.5, 1.234} {
		if err := b.SetPairedSample(bad); err == nil {
			t.Errorf("SetPairedSample(%v) accepted", bad)
		}
	}
	inside, both := 0, 0
	for i := range 10_000 {
		uid := fmt.Sprintf("uid-%d", i)
		if SampleBucket(uid) != flag.Bucket("paired-sample/"+uid) {
			t.Fatalf("SampleBucket(%s) is not the bucket of paired-sample/%s", uid, uid)
		}
		in := !b.sampledOut(uid)
		if in {
			inside++
			if flag.Bucket(uid) < 2_000 {
				both++
			}
		}
		wide := UnlimitedBudget()
		if err := wide.SetPairedSample(50); err != nil {
			t.Fatal(err)
		}
		if in && wide.sampledOut(uid) {
			t.Fatalf("%s is in the 20%% sample but not in the 50%% one", uid)
		}
	}
	// About 2,000 of 10,000 inside, and about a fifth of those in the ramp's first 20%: drawn
	// apart (a sample equal to the ramp would have them all).
	if inside < 1_800 || inside > 2_200 || both > 550 {
		t.Errorf("%d of 10,000 inside the 20%% sample, %d of them in the ramp's 20%%", inside, both)
	}

	const op = "MonitoringAndCLISecrets"
	paired := func(sample float64) (*legacyHarness, *Outcome) {
		h := newLegacyHarness(t, nil,
			map[string]secretOp{op: upsert("monitoring-config", map[string]string{"scrape": "true", "retention": "15d"})},
			Legacy[*corev1.Secret, state]{Ops: map[string]secretOp{op: upsert("monitoring-config", map[string]string{"scrape": "true"})}},
		)
		budget := UnlimitedBudget()
		if err := budget.SetPairedSample(sample); err != nil {
			t.Fatal(err)
		}
		h.engine.dry.budget = budget
		return h, h.reconcile(t)
	}
	out, in := "", ""
	for _, s := range []float64{0, 100} {
		h, o := paired(s)
		switch s {
		case 0:
			out = string(o.ComparisonSkipped)
			if o.Candidate != nil || o.DryRunRequests != 0 || h.candidateSpans()[op] != 0 {
				t.Errorf("sampled out, the candidate ran: %v, %d dry runs", o.Candidate != nil, o.DryRunRequests)
			}
		default:
			in = string(o.ComparisonSkipped)
			if o.Candidate == nil || h.candidateSpans()[op] != 1 {
				t.Errorf("sampled in, no comparison: %v", o.Candidate != nil)
			}
		}
	}
	if out != string(SkipSampledOut) || in != "" {
		t.Errorf("skipped: %q outside the sample, %q inside", out, in)
	}
	// Shared code (no legacy code of its own): compared whatever the sample.
	h := newHarness(t, "hostedcluster", nil)
	h.dry.budget = UnlimitedBudget()
	if err := h.dry.budget.SetPairedSample(0); err != nil {
		t.Fatal(err)
	}
	if o := h.reconcile(); o.ComparisonSkipped != "" || o.Candidate == nil {
		t.Errorf("shared code: skipped %q", o.ComparisonSkipped)
	}
}
