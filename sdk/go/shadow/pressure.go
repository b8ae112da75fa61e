package shadow

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/model"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
)

// Backing off: the shadow steps aside while the API server is under load, and comes back by
// itself (docs/engine.md, "Backing off", the same rule as the Rust engine's). Three signals pause
// it: a shadow request answered 429 Too Many Requests; a control request answered 429 (seen on
// a Routed config's control path, or on a config given to WatchControl); the control's requests
// slowing down (over each window of 32, watches excluded, the median latency above 3 times the
// baseline and above the baseline plus 100 ms; the baseline is the first window's median, then
// follows every window that is not slow, four fifths old, one fifth new). A pause lasts 1 s,
// doubled for each pause that begins within the previous one's length after it ended, up to
// 5 min; a longer Retry-After is honoured up to the same bound. While paused no comparison
// starts (Outcome.ComparisonSkipped is SkipPaused), and a comparison during which a pause began
// is dropped, counted the same way.
const (
	pauseInitial   = time.Second
	pauseMax       = 5 * time.Minute
	latencyWindow  = 32
	latencyFactor  = 3.0
	latencyFloor   = 100 * time.Millisecond
	baselineWeight = 5 // the new window's share: 1/baselineWeight
)

// pressure is a Budget's pause state.
// The reasons a pause begins, the label of shadow_reconciler_shadow_pauses_total (the Rust
// engine's Signal labels).
const (
	reasonShadowThrottled  = "shadow-throttled"
	reasonControlThrottled = "control-throttled"
	reasonControlSlow      = "control-slow"
)

// shadowPauses counts the pauses begun, by reason, in controller-runtime's metrics registry (the
// manager's /metrics), for every budget of the process: the Rust engine's family of that name.
var shadowPauses = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "shadow_reconciler_shadow_pauses_total",
	Help: "Pauses of the shadow under load, by what began them: shadow-throttled (a shadow request answered 429), control-throttled (a control request answered 429), control-slow (the control's requests slowed down).",
}, []string{"reason"})

func init() {
	for _, reason := range []string{reasonShadowThrottled, reasonControlThrottled, reasonControlSlow} {
		shadowPauses.WithLabelValues(reason)
	}
	// Registered once per process; a registry that already has it keeps its own.
	_ = crmetrics.Registry.Register(shadowPauses)
}

type pressure struct {
	disabled bool // never pauses (UnlimitedBudget)
	mu       sync.Mutex
	until    time.Time
	last     time.Duration
	streak   int
	window   []time.Duration
	baseline time.Duration

	pauses, refused atomic.Uint64
}

// pausedAt says whether the shadow is paused at now.
func (p *pressure) pausedAt(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return now.Before(p.until)
}

// signal pauses the shadow at now for reason unless it already is; it returns the pause begun
// (0: none).
func (p *pressure) signal(reason string, now time.Time, retryAfter time.Duration) time.Duration {
	if p.disabled {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pauseLocked(reason, now, retryAfter)
}

func (p *pressure) pauseLocked(reason string, now time.Time, retryAfter time.Duration) time.Duration {
	if now.Before(p.until) {
		return 0
	}
	if !p.until.IsZero() && now.Before(p.until.Add(p.last)) {
		p.streak++
	} else {
		p.streak = 0
	}
	length := pauseInitial
	for i := 0; i < p.streak && length < pauseMax; i++ {
		length *= 2
	}
	length = min(max(length, retryAfter), pauseMax)
	p.until, p.last = now.Add(length), length
	p.pauses.Add(1)
	shadowPauses.WithLabelValues(reason).Inc()
	return length
}

// controlLatency judges a control request's latency with its window; it returns the pause
// begun (0: none).
func (p *pressure) controlLatency(now time.Time, latency time.Duration) time.Duration {
	if p.disabled {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.window = append(p.window, latency)
	if len(p.window) < latencyWindow {
		return 0
	}
	window := p.window
	p.window = nil
	slices.Sort(window)
	median := window[len(window)/2]
	if p.baseline == 0 {
		p.baseline = median
		return 0
	}
	if float64(median) > latencyFactor*float64(p.baseline) && median > p.baseline+latencyFloor {
		return p.pauseLocked(reasonControlSlow, now, 0)
	}
	p.baseline = (p.baseline*(baselineWeight-1) + median) / baselineWeight
	return 0
}

// retryAfter is a response's Retry-After seconds (0 without them).
func retryAfter(resp *http.Response) time.Duration {
	seconds, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
	if err != nil || seconds < 0 {
		return 0
	}
	return time.Duration(seconds) * time.Second
}

// Pauses is the number of pauses begun.
func (b *Budget) Pauses() uint64 {
	if b == nil {
		return 0
	}
	return b.p.pauses.Load()
}

// PausedRefusals is the number of comparisons refused while the shadow was paused.
func (b *Budget) PausedRefusals() uint64 {
	if b == nil {
		return 0
	}
	return b.p.refused.Load()
}

// Paused says whether the shadow is paused now.
func (b *Budget) Paused() bool { return b != nil && b.p.pausedAt(b.now()) }

// admit says why a comparison may not start now ("": it may): paused, or the budget spent.
func (b *Budget) admit() ComparisonSkip {
	if b == nil {
		return ""
	}
	if b.p.pausedAt(b.now()) {
		b.p.refused.Add(1)
		return SkipPaused
	}
	if !b.TryBegin() {
		return SkipBudget
	}
	return ""
}

// shadowThrottle is the dry-run transport's last step: a 429 pauses the shadow, and loses its
// Retry-After, so client-go does not retry it: the shadow steps aside at once instead of waiting
// for the server.
type shadowThrottle struct {
	next http.RoundTripper
	b    *Budget
}

func (t shadowThrottle) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests && t.b != nil {
		t.b.p.signal(reasonShadowThrottled, t.b.now(), retryAfter(resp))
		resp.Header.Del("Retry-After")
	}
	return resp, err
}

// controlWatch times the control's requests (watches excluded) and sees their 429s, for the
// shadow's pauses; it changes nothing about them.
type controlWatch struct {
	next http.RoundTripper
	b    *Budget
}

func (w controlWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("User-Agent") == UserAgent {
		// A dry-run client built from the watched config (NewDryRun copies it): the shadow's
		// own request, not the control's.
		return w.next.RoundTrip(req)
	}
	started := w.b.now()
	resp, err := w.next.RoundTrip(req)
	now := w.b.now()
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		w.b.p.signal(reasonControlThrottled, now, retryAfter(resp))
	}
	if q := req.URL.Query().Get("watch"); q != "true" && q != "1" {
		w.b.p.controlLatency(now, now.Sub(started))
	}
	return resp, err
}

// WatchControl makes config's requests (the control's: a controller-runtime manager's config,
// before the manager is built) pause the shadow of b when they meet 429s or slow down
// (docs/engine.md, "Backing off"). It adds a transport wrapper and changes nothing else; a
// Routed config watches its control path by itself. A DryRun built from the watched config
// still is the shadow's: its requests (by their User-Agent) are not judged.
func WatchControl(config *rest.Config, b *Budget) {
	if config == nil || b == nil || b.p.disabled {
		return // an unlimited budget never pauses: nothing to watch
	}
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return watchedControl(rt, b) })
}

// admit is the budget of a reconcile in mode (nil: no shadow) and why its comparison is skipped
// ("": it is not): a comparison that pairs code (calibrate's, or the candidate's own code beside
// the legacy control's) for the objects of the paired sample only, then the pause and the budget.
func (e *Engine[T, S]) admit(mode flag.Mode, uid string, control *model.Policy) (*Budget, ComparisonSkip) {
	if mode == flag.Off || e.dry == nil {
		return nil, ""
	}
	pairs := mode == flag.Calibrate || (control.Path() == plan.PathLegacy && e.pairsCode())
	if pairs && e.dry.budget.sampledOut(uid) {
		return e.dry.budget, SkipSampledOut
	}
	return e.dry.budget, e.dry.budget.admit()
}

// pairsCode says whether some operation in both paths has legacy code of its own (or the
// legacy loop is one function): a comparison in mode shadow then pairs code.
func (e *Engine[T, S]) pairsCode() bool {
	for i, op := range e.plan.Operations {
		if op.Only == "" && (e.fn != nil || e.legacy[i] != nil) {
			return true
		}
	}
	return false
}

// watchedControl is the control's transport, watched for the shadow's pauses unless b never
// pauses.
func watchedControl(rt http.RoundTripper, b *Budget) http.RoundTripper {
	if b == nil || b.p.disabled {
		return rt
	}
	return controlWatch{next: rt, b: b}
}
