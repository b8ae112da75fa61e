package shadow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/flag"
)

// The shadow's own request budget (the Rust crate's ShadowBudget, `run --shadow-qps`): a token
// bucket that only the candidate's requests spend (its dry runs, the paired runs of legacy code
// of its own, its reads through the dry-run config), never the control's client-side rate
// limiter. It never waits. A reconcile's comparison starts only when the bucket holds a token;
// otherwise the control runs alone, exactly as with the shadow off, and the skip is counted
// (Outcome.ComparisonSkipped, the reconcile span's shadow_reconciler.comparison_skipped). A
// comparison that started runs to its end: each request takes a token, into debt if need be, and
// the refill pays the debt back before the next comparison starts. The shadow's long-run rate
// stays at or under QPS.

// DefaultBudgetQPS and DefaultBudgetBurst are the budget a DryRun gets unless WithBudget gives
// another (the Rust `run`'s defaults).
const (
	DefaultBudgetQPS   = 10.0
	DefaultBudgetBurst = 20
)

// ComparisonSkip says why a reconcile's control ran alone.
type ComparisonSkip string

const (
	// SkipBudget: the shadow's request budget was spent.
	SkipBudget ComparisonSkip = "budget"
	// SkipPaused: the shadow stood aside under load.
	SkipPaused ComparisonSkip = "paused"
	// SkipSampledOut: the comparison would pair code (the candidate's own code of an operation,
	// or a legacy loop, run beside the control's; or calibrate's), and the object is outside the
	// budget's paired sample.
	SkipSampledOut ComparisonSkip = "sampled-out"
)

// DefaultPairedSamplePercent is the paired sample of ParseBudget's budget with a rate (a command
// line's default): a fifth of the objects. Every other budget samples every object until
// SetPairedSample.
const DefaultPairedSamplePercent = 20.0

// Budget is the shadow's request budget. Share one between the DryRuns of a process (every
// engine's candidate then spends the same budget). A nil *Budget is unlimited and counts nothing.
type Budget struct {
	qps, burst float64 // qps 0: unlimited
	now        func() time.Time

	mu     sync.Mutex
	tokens float64
	at     time.Time

	sent, refused atomic.Uint64
	p             pressure
	// sample is the paired sample in basis points (flag.Bucket of "paired-sample/" + UID below
	// it: inside).
	sample atomic.Uint32
}

// NewBudget is a budget of qps requests per second, up to burst at once; it starts full.
func NewBudget(qps float64, burst int) (*Budget, error) {
	if math.IsNaN(qps) || math.IsInf(qps, 0) || qps <= 0 {
		return nil, fmt.Errorf("shadow.NewBudget: the shadow's request rate must be a positive number of requests per second, not %v", qps)
	}
	if burst < 1 {
		return nil, fmt.Errorf("shadow.NewBudget: the shadow's burst must be at least 1 request, not %d", burst)
	}
	b := &Budget{qps: qps, burst: float64(burst), now: time.Now, tokens: float64(burst)}
	b.at = b.now()
	b.sample.Store(flag.All)
	return b, nil
}

// ParseBudget is the budget of a command line's --shadow-qps and --shadow-burst: qps a positive
// number of requests per second, with the DefaultPairedSamplePercent sample, or "unlimited"
// (UnlimitedBudget: no bound, no pause, every object sampled; then burst must be 0, unset),
// burst 0 for DefaultBudgetBurst.
func ParseBudget(qps string, burst int) (*Budget, error) {
	if qps == "unlimited" {
		if burst != 0 {
			return nil, fmt.Errorf("--shadow-burst bounds a budget, and --shadow-qps unlimited has none: give a rate, or leave --shadow-burst out")
		}
		return UnlimitedBudget(), nil
	}
	rate, err := strconv.ParseFloat(qps, 64)
	if err != nil {
		return nil, fmt.Errorf("--shadow-qps %q is not a rate: give a positive number of requests per second (0.5, 10) or unlimited", qps)
	}
	if burst == 0 {
		burst = DefaultBudgetBurst
	}
	b, err := NewBudget(rate, burst)
	if err != nil {
		return nil, err
	}
	b.sample.Store(uint32(DefaultPairedSamplePercent * 100))
	return b, nil
}

// UnlimitedBudget never refuses a comparison, and never pauses under load (as the Rust engine's
// unlimited budget); it still counts the requests.
func UnlimitedBudget() *Budget {
	b := &Budget{now: time.Now, p: pressure{disabled: true}}
	b.sample.Store(flag.All)
	return b
}

// SetPairedSample makes the comparisons that pair code (SkipSampledOut) run for percent (0 to
// 100, at most two decimals) of the objects only, chosen by a stable hash of each UID apart from
// the ramp's: the paired runs' CPU and requests are bounded by it (the Rust tool's
// --paired-sample-percent). Default: every object, but DefaultPairedSamplePercent in
// ParseBudget's budget with a rate (a command line's default, as the Rust tool's run).
func (b *Budget) SetPairedSample(percent float64) error {
	points, ok := flag.RampFromPercent(percent)
	if !ok {
		return fmt.Errorf("shadow: the paired sample %v is not a share of the objects: give a percentage from 0 to 100, at most two decimals", percent)
	}
	b.sample.Store(uint32(points))
	return nil
}

// PairedSample is the share of objects, in percent, whose comparisons may pair code.
func (b *Budget) PairedSample() float64 {
	if b == nil {
		return 100
	}
	return float64(b.sample.Load()) / 100
}

// SampleBucket is the object's bucket in the paired sample, 0 to 9,999: flag.Bucket of
// "paired-sample/" followed by its UID (the Rust crate's flag::sample_bucket).
func SampleBucket(uid string) uint16 { return flag.Bucket("paired-sample/" + uid) }

// sampledOut says whether a comparison that pairs code leaves the object with uid out.
func (b *Budget) sampledOut(uid string) bool {
	return b != nil && uint32(SampleBucket(uid)) >= b.sample.Load()
}

func defaultBudget() *Budget {
	b, err := NewBudget(DefaultBudgetQPS, DefaultBudgetBurst)
	if err != nil {
		panic(err) // the defaults are valid
	}
	return b
}

func (b *Budget) refill() {
	now := b.now()
	if elapsed := now.Sub(b.at).Seconds(); elapsed > 0 {
		b.tokens = math.Min(b.tokens+elapsed*b.qps, b.burst)
		b.at = now
	}
}

// TryBegin says whether a comparison may start now (the bucket holds a token; it takes none:
// the comparison's requests do). A refusal is counted.
func (b *Budget) TryBegin() bool {
	if b == nil || b.qps == 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.tokens >= 1 {
		return true
	}
	b.refused.Add(1)
	return false
}

// Spend takes a token for one request the shadow sends, into debt if the bucket is empty.
func (b *Budget) Spend() {
	if b == nil {
		return
	}
	b.sent.Add(1)
	if b.qps == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	b.tokens--
}

// Sent is the number of requests the shadow sent through the budget.
func (b *Budget) Sent() uint64 { return b.sent.Load() }

// Refused is the number of comparisons refused because the budget was spent.
func (b *Budget) Refused() uint64 { return b.refused.Load() }

// limiter is the budget as client-go's rate limiter of the dry-run config: it never waits, and
// each request it lets through takes a token.
type limiter struct{ b *Budget }

var _ flowcontrol.RateLimiter = limiter{}

func (l limiter) TryAccept() bool            { l.b.Spend(); return true }
func (l limiter) Accept()                    { l.b.Spend() }
func (l limiter) Stop()                      {}
func (l limiter) QPS() float32               { return float32(l.b.qps) }
func (l limiter) Wait(context.Context) error { l.b.Spend(); return nil }

// routedLimiter is a Routed config's rate limiter: a candidate run's requests (InCandidate)
// spend the shadow's budget and never wait; the others go through the control's limiter, as
// they would without the shadow.
type routedLimiter struct {
	control flowcontrol.RateLimiter
	shadow  limiter
}

func (r routedLimiter) TryAccept() bool { return r.control.TryAccept() }
func (r routedLimiter) Accept()         { r.control.Accept() }
func (r routedLimiter) Stop()           { r.control.Stop() }
func (r routedLimiter) QPS() float32    { return r.control.QPS() }
func (r routedLimiter) Wait(ctx context.Context) error {
	if InCandidate(ctx) {
		return r.shadow.Wait(ctx)
	}
	return r.control.Wait(ctx)
}

// controlLimiter is the limiter client-go would give a client of config: its own RateLimiter,
// else a token bucket of its QPS and Burst (client-go's defaults when zero), none when QPS is
// negative.
func controlLimiter(config *rest.Config) flowcontrol.RateLimiter {
	if config.RateLimiter != nil {
		return config.RateLimiter
	}
	qps, burst := config.QPS, config.Burst
	if qps < 0 {
		return flowcontrol.NewFakeAlwaysRateLimiter()
	}
	if qps == 0 {
		qps = rest.DefaultQPS
	}
	if burst == 0 {
		burst = rest.DefaultBurst
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, burst)
}

// DryRunOption configures a DryRun.
type DryRunOption func(*DryRun) error

// WithBudget makes the DryRun's requests spend b (share one Budget between the DryRuns of a
// process); nil is refused. Default: a budget of DefaultBudgetQPS and DefaultBudgetBurst of the
// DryRun's own.
func WithBudget(b *Budget) DryRunOption {
	return func(d *DryRun) error {
		if b == nil {
			return errors.New("shadow.WithBudget: the budget is nil (UnlimitedBudget for no bound)")
		}
		d.budget = b
		return nil
	}
}
