package shadow

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// client-go and informer controllers: a controller on a typed clientset (or a dynamic client,
// or a library's patcher built on one), informers, listers and a workqueue runs the engine with
// no controller-runtime client. Its clients are built twice, once on its own REST config for the
// control and once on the dry-run config for the candidate (Clients); an operation picks the
// one of its run (Clients.For); the objects come from its listers (Sync), and its workqueue
// requeues with the control's result (ProcessNext).

// Clients are one kind of client built for both runs: Control on the controller's REST config,
// Candidate on the dry-run config (DryRun.Config), whose every write is a dry run.
type Clients[C any] struct {
	Control, Candidate C
}

// NewClients builds a client with build (kubernetes.NewForConfig, dynamic.NewForConfig, a
// generated clientset's NewForConfig, ...) on the controller's REST config and on dry's. Build
// them once, beside the controller's own: a client per reconcile would open connections per
// reconcile.
func NewClients[C any](config *rest.Config, dry *DryRun, build func(*rest.Config) (C, error)) (Clients[C], error) {
	var out Clients[C]
	if config == nil || dry == nil || dry.config == nil {
		return out, errors.New("shadow.NewClients: the controller's REST config and a DryRun with a config (NewDryRun or NewDryRunConfig) are required")
	}
	var err error
	if out.Control, err = build(rest.CopyConfig(config)); err != nil {
		return out, fmt.Errorf("the control's client: %w", err)
	}
	if out.Candidate, err = build(dry.Config()); err != nil {
		return out, fmt.Errorf("the candidate's client: %w", err)
	}
	return out, nil
}

// Routed is a REST config for one client that serves both runs, for a controller that builds
// its clients once, inside code it does not own (a library's controller taking a clientset): a
// request whose context is a candidate run's (InCandidate) goes through the dry-run path (made
// a dry run, through the guard, counted, with the candidate's User-Agent), any other as the
// controller's (control is its REST config; the dry-run path is d's, made from the same one).
// The candidate's code must pass the run's context to every request: a request it makes with
// another context (context.Background) goes out as the control's, a real write. Prefer
// NewClients, whose candidate client can send nothing but dry runs, where the code lets you
// choose its client per run; the API server's audit log tells the two apart by User-Agent.
//
// The routed config's rate limiter sends the control's requests through the controller's own
// (control's RateLimiter, else a token bucket of its QPS and Burst, as client-go would make:
// one for every client built from the routed config) and the candidate's through the shadow's
// budget (d.Budget), which never waits: the shadow never spends what the control needs.
func (d *DryRun) Routed(control *rest.Config) (*rest.Config, error) {
	if control == nil || d.config == nil {
		return nil, errors.New("shadow: Routed needs the controller's REST config and a DryRun with a config (NewDryRun or NewDryRunConfig)")
	}
	real, err := rest.TransportFor(control)
	if err != nil {
		return nil, fmt.Errorf("the control's transport: %w", err)
	}
	dry, err := rest.TransportFor(d.config)
	if err != nil {
		return nil, fmt.Errorf("the candidate's transport: %w", err)
	}
	// The transports carry the TLS, the credentials and the User-Agent of each path: the
	// routed config keeps only what builds requests.
	routed := &rest.Config{
		Host: control.Host, APIPath: control.APIPath, ContentConfig: control.ContentConfig,
		QPS: control.QPS, Burst: control.Burst,
		RateLimiter: routedLimiter{control: controlLimiter(control), shadow: limiter{d.budget}},
		Timeout:     control.Timeout, WarningHandler: control.WarningHandler,
		WarningHandlerWithContext: control.WarningHandlerWithContext,
		Transport:                 router{control: watchedControl(real, d.budget), candidate: dry, controlAgent: control.UserAgent},
	}
	return routed, nil
}

// router sends a candidate run's requests through the dry-run transport, the others through
// the controller's, each with its path's User-Agent (the client set its default one, which
// client-go's transports keep).
type router struct {
	control, candidate http.RoundTripper
	controlAgent       string
}

func (r router) RoundTrip(req *http.Request) (*http.Response, error) {
	agent, next := r.controlAgent, r.control
	if InCandidate(req.Context()) {
		agent, next = UserAgent, r.candidate
	}
	if agent != "" {
		req = req.Clone(req.Context())
		req.Header.Set("User-Agent", agent)
	}
	return next.RoundTrip(req)
}

// DryRunner is a run that says whether it is the candidate's dry run (*Run is one).
type DryRunner interface{ DryRun() bool }

// For is the client of r's run: Candidate in the candidate's dry run, Control otherwise. An
// operation must write through it (a write through Control in the candidate's run is refused
// by nothing but review: the guard sits on the candidate's clients).
func (c Clients[C]) For(r DryRunner) C {
	if r.DryRun() {
		return c.Candidate
	}
	return c.Control
}

// Attempter is a run that says which attempt of the operation it is (*Run is one).
type Attempter interface{ Attempt() int }

// Fresh reads an object for an attempt of an operation: from the cache (cached: a lister) on
// the first attempt, from the API server (fresh: a GET) on the attempts after a 409, which the
// cached version caused. This is client-go's RetryOnConflict idiom, for operations that run
// under the engine's retry-on-conflict (Run.RetryOnConflict).
func Fresh[O any](r Attempter, cached func() (O, error), fresh func() (O, error)) (O, error) {
	if r.Attempt() > 1 {
		return fresh()
	}
	return cached()
}

// NewRouted is NewDryRunConfig and its Routed config, for a controller whose one client serves
// both runs.
func NewRouted(config *rest.Config, opts ...DryRunOption) (*DryRun, *rest.Config, error) {
	dry, err := NewDryRunConfig(config, opts...)
	if err != nil {
		return nil, nil, err
	}
	routed, err := dry.Routed(config)
	return dry, routed, err
}

// SyncFunc is a workqueue controller's sync of one key, returning the control's result.
type SyncFunc[K comparable] func(ctx context.Context, key K) (reconcile.Result, error)

// Sync adapts the engine to a workqueue controller: get reads the object of a key (the
// informer's lister: lister.Get(name), or lister.Namespace(ns).Get(name) after
// cache.SplitMetaNamespaceKey); an object that is gone (a NotFound from get) is not reconciled.
// The engine gets a deep copy: a lister's objects are the cache's, shared and never modified.
func Sync[K comparable, T client.Object, S any](e *Engine[T, S], get func(key K) (T, error)) SyncFunc[K] {
	return func(ctx context.Context, key K) (reconcile.Result, error) {
		obj, err := get(key)
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("read %v: %w", key, err)
		}
		return e.Reconcile(ctx, obj.DeepCopyObject().(T)).Result()
	}
}

// ProcessNext takes the next key of queue and syncs it, as a client-go worker does: an error
// requeues the key rate-limited, a requeue asks for it after its delay, success forgets its
// failures. It returns false once the queue is shut down. A worker is
// `for shadow.ProcessNext(ctx, queue, sync) {}`.
func ProcessNext[K comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[K], sync SyncFunc[K]) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	result, err := sync(ctx, key)
	switch {
	case err != nil:
		queue.AddRateLimited(key)
	case result.RequeueAfter > 0:
		queue.Forget(key)
		queue.AddAfter(key, result.RequeueAfter)
	default:
		queue.Forget(key)
	}
	return true
}

// RunWorkers runs workers that sync the keys of queue until ctx ends, then shuts the queue
// down and waits for them: a client-go controller's Run, its sync through the engine.
func RunWorkers[K comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[K], syncKey SyncFunc[K], workers int) {
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for ProcessNext(ctx, queue, syncKey) {
			}
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
}
