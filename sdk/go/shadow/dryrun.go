package shadow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// UserAgent is the User-Agent of every request of the candidate's client, so audit logs can
// attribute them.
const UserAgent = "shadow-reconciler-go-dry-run/" + Version

// Version of this package, in user agents and span scopes.
const Version = "0.1.0"

// GuardStats counts what the candidate's transport saw.
type GuardStats struct {
	refused  atomic.Uint64
	dryRuns  atomic.Uint64
	overlays atomic.Uint64
}

// Refused is the number of mutating requests refused because they were not dry runs: it must
// stay 0 (a refusal means an operation wrote through a client of its own, bypassing the
// dry-run client; the write was stopped).
func (g *GuardStats) Refused() uint64 { return g.refused.Load() }

// DryRunRequests is the number of dry-run mutating requests sent.
func (g *GuardStats) DryRunRequests() uint64 { return g.dryRuns.Load() }

// OverlayReads is the number of reads answered from a reconcile's dry-run writes.
func (g *GuardStats) OverlayReads() uint64 { return g.overlays.Load() }

type statsKey struct{}

// protobufMagic starts every protobuf body of the Kubernetes API.
var protobufMagic = []byte("k8s\x00")

// deleteOptions reads a DELETE's options in any encoding the API takes: protobuf (what
// controller-runtime sends for built-in types), CBOR, JSON or YAML. Only the fields are read,
// not the envelope's apiVersion: controller-runtime labels a custom resource's DeleteOptions
// with that resource's group and version, which no scheme of ours knows.
func deleteOptions(contentType string, body []byte) (*metav1.DeleteOptions, error) {
	options := &metav1.DeleteOptions{}
	switch {
	case bytes.HasPrefix(body, protobufMagic):
		var envelope runtime.Unknown
		if err := envelope.Unmarshal(body[len(protobufMagic):]); err != nil {
			return nil, err
		}
		return options, options.Unmarshal(envelope.Raw)
	case strings.HasPrefix(contentType, "application/cbor"):
		return options, direct.Unmarshal(body, options)
	default:
		return options, yaml.Unmarshal(body, options)
	}
}

// DryRun makes the candidate's clients: reads from the controller's reader (its cache, so the
// candidate costs no read requests), writes with `dryRun=All` through a transport of their own
// that refuses anything else, and a per-reconcile overlay so an operation reads what an earlier
// dry-run write of the same reconcile would have produced.
type DryRun struct {
	// dry is the controller-runtime client (nil when made by NewDryRunConfig).
	dry    client.Client
	config *rest.Config
	stats  *GuardStats
	budget *Budget
	// identity is the user the dry runs impersonate (WithIdentity); "": the controller's.
	identity string
}

// NewDryRun builds the candidate's client from the controller's REST config and reader (the
// manager's cache: mgr.GetCache(), or mgr.GetClient() for reads through the manager's client).
// options gives the scheme and REST mapper (the manager's: mgr.GetScheme(),
// mgr.GetRESTMapper()) and, in Cache.DisableFor, the kinds the controller's client reads from the
// API server rather than its cache (give the manager's, so the candidate reads the same world as
// the control); its HTTPClient and the rest of Cache are set here.
func NewDryRun(config *rest.Config, reader client.Reader, options client.Options, opts ...DryRunOption) (*DryRun, error) {
	d, err := NewDryRunConfig(config, opts...)
	if err != nil {
		return nil, err
	}
	cfg := d.config
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the dry-run client's HTTP client: %w", err)
	}
	options.HTTPClient = httpClient
	if reader != nil {
		cache := &client.CacheOptions{Reader: reader, Unstructured: true}
		if options.Cache != nil {
			cache.DisableFor = options.Cache.DisableFor
		}
		options.Cache = cache
	}
	writer, err := client.New(cfg, options)
	if err != nil {
		return nil, fmt.Errorf("the dry-run client: %w", err)
	}
	d.dry = client.NewDryRunClient(writer)
	return d, nil
}

// NewDryRunConfig makes the candidate's side for a controller without controller-runtime (a
// client-go typed clientset, a dynamic client, informers and a workqueue): Config is the REST
// config to build the candidate's clients from. Every mutating request sent through it carries
// dryRun=All (added to the query, or to a DELETE's options in its body, where the caller did not
// ask for it) and passes the same guard as NewDryRun's client; its reads go to the API server,
// so a candidate reads through the controller's listers as the control does. Build the clients
// once (NewClients), not per reconcile.
//
// Its requests never go through the controller's client-side rate limiter (config's
// RateLimiter, QPS and Burst): they spend the shadow's own Budget (WithBudget; default
// DefaultBudgetQPS, DefaultBudgetBurst), never wait, and a reconcile that finds the budget spent
// runs its control alone (Outcome.ComparisonSkipped).
func NewDryRunConfig(config *rest.Config, opts ...DryRunOption) (*DryRun, error) {
	if config == nil {
		return nil, errors.New("shadow.NewDryRunConfig: the controller's REST config is nil")
	}
	stats := &GuardStats{}
	d := &DryRun{stats: stats}
	for _, opt := range opts {
		if err := opt(d); err != nil {
			return nil, err
		}
	}
	if d.budget == nil {
		d.budget = defaultBudget()
	}
	cfg := rest.CopyConfig(config)
	cfg.UserAgent = UserAgent
	if d.identity != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: d.identity}
	}
	cfg.RateLimiter = limiter{d.budget}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return shadowThrottle{next: rt, b: d.budget} })
	// Wrapped last, run first: the request is made a dry run, then the guard checks it.
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &guard{next: rt, stats: stats} })
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return dryRunAll{next: rt} })
	d.config = cfg
	return d, nil
}

// Budget is the shadow's request budget its requests spend.
func (d *DryRun) Budget() *Budget { return d.budget }

// Config is a copy of the candidate's REST config (NewDryRunConfig): any client built from it
// sends only dry runs, through the guard, and counts them in Stats and, with a context from the
// engine's candidate run, in that reconcile's Outcome.
func (d *DryRun) Config() *rest.Config { return rest.CopyConfig(d.config) }

// WithIdentity makes the DryRun's requests impersonate user (as kubectl's --as; a
// ServiceAccount is system:serviceaccount:NAMESPACE:NAME), in place of any impersonation of the
// controller's config: the API server's Priority and Fairness, which classifies a request after
// impersonation, then puts them in that identity's FlowSchema, apart from the control's, and can
// shed them first (the Rust tool's `run --shadow-as`; deploy/components/shadow-flow ships the
// FlowSchema, the priority level and the RBAC). The controller's identity needs `impersonate` on
// user, and user the controller's permissions: a dry run is authorized as the write it is.
func WithIdentity(user string) DryRunOption {
	return func(d *DryRun) error {
		if user == "" || strings.IndexFunc(user, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return fmt.Errorf("shadow.WithIdentity: %q is not a user name: give one without spaces, e.g. system:serviceaccount:NAMESPACE:NAME", user)
		}
		d.identity = user
		return nil
	}
}

// dryRunAll makes every mutating request a dry run: dryRun=All in the query, or in the options
// a DELETE carries in its body (the API server then reads them from the body alone).
type dryRunAll struct{ next http.RoundTripper }

func (d dryRunAll) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return d.next.RoundTrip(req)
	}
	if dry, err := isDryRun(req); err != nil || dry {
		return d.next.RoundTrip(req) // the guard reports an unreadable body
	}
	out := req.Clone(req.Context())
	if req.Method == http.MethodDelete && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, fmt.Errorf("the dry-run transport cannot read the DELETE body: %w", err)
		}
		_ = req.Body.Close()
		if len(bytes.TrimSpace(body)) > 0 {
			options, err := deleteOptions(req.Header.Get("Content-Type"), body)
			if err != nil {
				return nil, fmt.Errorf("the dry-run transport cannot read the options of DELETE %s: %w", req.URL.Path, err)
			}
			options.TypeMeta = metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "meta.k8s.io/v1"}
			options.DryRun = []string{metav1.DryRunAll}
			body, err = json.Marshal(options)
			if err != nil {
				return nil, err
			}
			out.Header.Set("Content-Type", "application/json")
		}
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.ContentLength = int64(len(body))
	}
	query := out.URL.Query()
	query.Set("dryRun", metav1.DryRunAll)
	u := *out.URL
	u.RawQuery = query.Encode()
	out.URL = &u
	return d.next.RoundTrip(out)
}

// Stats are the counters of every candidate run.
func (d *DryRun) Stats() *GuardStats { return d.stats }

// ForReconcile is a client for one candidate run, with an empty overlay. Requests must carry a
// context from WithCounters for the run's own counts. Nil when the DryRun has no
// controller-runtime client (NewDryRunConfig).
func (d *DryRun) ForReconcile() client.Client {
	if d.dry == nil {
		return nil
	}
	return &overlay{Client: d.dry, objects: map[overlayKey]runtime.Object{}, stats: d.stats}
}

// WithCounters returns a context whose dry-run requests are also counted in local.
func WithCounters(ctx context.Context, local *GuardStats) context.Context {
	return context.WithValue(ctx, statsKey{}, local)
}

func countersOf(ctx context.Context) *GuardStats {
	s, _ := ctx.Value(statsKey{}).(*GuardStats)
	return s
}

// guard refuses every mutating request that would reach the API server without dryRun=All
// where the server reads it: the query, or, for a DELETE carrying DeleteOptions, the body (the
// server then reads the options from the body alone).
type guard struct {
	next  http.RoundTripper
	stats *GuardStats
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return g.next.RoundTrip(req)
	}
	local := countersOf(req.Context())
	dry, err := isDryRun(req)
	if err != nil {
		return nil, err
	}
	if !dry {
		g.stats.refused.Add(1)
		if local != nil {
			local.refused.Add(1)
		}
		return refusal(req), nil
	}
	g.stats.dryRuns.Add(1)
	if local != nil {
		local.dryRuns.Add(1)
	}
	return g.next.RoundTrip(req)
}

func isDryRun(req *http.Request) (bool, error) {
	all := func(values []string) bool {
		for _, v := range values {
			if v == metav1.DryRunAll {
				return true
			}
		}
		return false
	}
	if req.Method == http.MethodDelete && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return false, fmt.Errorf("the dry-run guard cannot read the DELETE body: %w", err)
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if len(bytes.TrimSpace(body)) > 0 {
			options, err := deleteOptions(req.Header.Get("Content-Type"), body)
			if err != nil {
				return false, nil // an undecodable body is not a dry run
			}
			return all(options.DryRun), nil
		}
	}
	return all(req.URL.Query()["dryRun"]), nil
}

func refusal(req *http.Request) *http.Response {
	message := fmt.Sprintf("shadow-reconciler's dry-run guard refused %s %s: the candidate may only send dry runs (dryRun=All)", req.Method, req.URL.Path)
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
	}
	body, _ := json.Marshal(status)
	return &http.Response{
		StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}},
		Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

type overlayKey struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

// overlay answers a Get of an object written (or deleted) in dry run earlier in the same
// candidate run with that would-be object (or NotFound). Lists do not see it, as in the Rust
// engine.
type overlay struct {
	client.Client
	mu      sync.Mutex
	objects map[overlayKey]runtime.Object // nil: deleted
	stats   *GuardStats
}

func (o *overlay) key(obj runtime.Object, namespace, name string) (overlayKey, bool) {
	gvk, err := o.GroupVersionKindFor(obj)
	if err != nil {
		return overlayKey{}, false
	}
	return overlayKey{gvk, namespace, name}, true
}

func (o *overlay) remember(obj client.Object, deleted bool) {
	k, ok := o.key(obj, obj.GetNamespace(), obj.GetName())
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if deleted {
		o.objects[k] = nil
	} else {
		o.objects[k] = obj.DeepCopyObject()
	}
}

func (o *overlay) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if k, ok := o.key(obj, key.Namespace, key.Name); ok {
		o.mu.Lock()
		stored, found := o.objects[k]
		o.mu.Unlock()
		if found {
			o.stats.overlays.Add(1)
			if local := countersOf(ctx); local != nil {
				local.overlays.Add(1)
			}
			if stored == nil {
				mapping, err := o.RESTMapper().RESTMapping(k.gvk.GroupKind(), k.gvk.Version)
				resource := schema.GroupResource{Group: k.gvk.Group, Resource: strings.ToLower(k.gvk.Kind) + "s"}
				if err == nil {
					resource = mapping.Resource.GroupResource()
				}
				return apierrors.NewNotFound(resource, key.Name)
			}
			return copyInto(stored, obj)
		}
	}
	return o.Client.Get(ctx, key, obj, opts...)
}

// copyInto sets dst to src, converting between typed and unstructured forms.
func copyInto(src runtime.Object, dst client.Object) error {
	gvk := src.GetObjectKind().GroupVersionKind()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		return err
	}
	if u, ok := dst.(*unstructured.Unstructured); ok {
		u.Object = runtime.DeepCopyJSON(content)
		if !gvk.Empty() {
			u.SetGroupVersionKind(gvk)
		}
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(content, dst)
}

func (o *overlay) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := o.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	o.remember(obj, false)
	return nil
}

func (o *overlay) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := o.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	o.remember(obj, false)
	return nil
}

func (o *overlay) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := o.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	o.remember(obj, false)
	return nil
}

func (o *overlay) Apply(ctx context.Context, ac runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := o.Client.Apply(ctx, ac, opts...); err != nil {
		return err
	}
	// The server's answer was decoded into the apply configuration: keep it as an object.
	if data, err := json.Marshal(ac); err == nil {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err == nil && u.GetName() != "" {
			o.remember(u, false)
		}
	}
	return nil
}

func (o *overlay) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := o.Client.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	o.remember(obj, true)
	return nil
}

func (o *overlay) Status() client.SubResourceWriter { return o.SubResource("status") }

func (o *overlay) SubResource(name string) client.SubResourceClient {
	return &overlaySubResource{SubResourceClient: o.Client.SubResource(name), overlay: o}
}

type overlaySubResource struct {
	client.SubResourceClient
	overlay *overlay
}

func (s *overlaySubResource) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *overlaySubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.SubResourceClient.Update(ctx, obj, opts...); err != nil {
		return err
	}
	s.overlay.remember(obj, false)
	return nil
}

func (s *overlaySubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.SubResourceClient.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	s.overlay.remember(obj, false)
	return nil
}
