package shadow

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestTheOverlayShowsTheRunsOwnDryRunWritesAndDeletes(t *testing.T) {
	existing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old"}, Data: map[string]string{"k": "v"}}
	real := fake.NewClientBuilder().WithObjects(existing).Build()
	d := &DryRun{dry: client.NewDryRunClient(real), stats: &GuardStats{}}
	ctx := WithCounters(context.Background(), &GuardStats{})
	c := d.ForReconcile()

	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}, Data: map[string]string{"a": "b"}}
	if err := c.Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "new"}, got); err != nil || got.Data["a"] != "b" {
		t.Fatalf("the run does not read its own dry-run create: %v %v", err, got.Data)
	}
	if err := real.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "new"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry-run create persisted: %v", err)
	}
	if err := c.Delete(ctx, existing.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "old"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after its dry-run delete the run must read NotFound: %v", err)
	}
	if err := real.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "old"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the dry-run delete persisted: %v", err)
	}
	// Another run starts from an empty overlay.
	if err := d.ForReconcile().Get(ctx, types.NamespacedName{Namespace: "ns", Name: "old"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the overlay leaked into another run: %v", err)
	}
	if d.Stats().OverlayReads() != 2 {
		t.Errorf("overlay reads: %d", d.Stats().OverlayReads())
	}
}

// A recording API server behind the guard's transport: what reaches it, and what is refused.
func TestTheGuardRefusesEveryWriteThatIsNotADryRun(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		dry := r.URL.Query().Get("dryRun") == "All"
		if len(body) > 0 && r.Method == http.MethodDelete {
			options, err := deleteOptions(r.Header.Get("Content-Type"), body)
			dry = err == nil && len(options.DryRun) == 1 && options.DryRun[0] == "All"
		}
		mu.Lock()
		reached = append(reached, fmt.Sprintf("%s %s dry=%t", r.Method, r.URL.RequestURI(), dry))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer server.Close()
	stats := &GuardStats{}
	rt := &guard{next: http.DefaultTransport, stats: stats}
	local := &GuardStats{}
	ctx := WithCounters(context.Background(), local)
	send := func(method, query, body string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, server.URL+"/api/v1/namespaces/ns/configmaps/x"+query, bytes.NewBufferString(body))
		if body == "" {
			req.Body = http.NoBody
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	cases := []struct {
		method, query, body string
		allowed             bool
	}{
		{"GET", "", "", true},
		{"POST", "?dryRun=All", "{}", true},
		{"PUT", "?dryRun=All&fieldManager=x", "{}", true},
		{"PATCH", "?dryRun=All", "{}", true},
		{"POST", "", "{}", false},
		{"PATCH", "?dryRun=None", "{}", false},
		{"DELETE", "", `{"dryRun":["All"]}`, true},
		{"DELETE", "?dryRun=All", "", true},
		// A custom resource's DeleteOptions carry its group and version.
		{"DELETE", "", `{"kind":"DeleteOptions","apiVersion":"example.shadow-reconciler.io/v1","dryRun":["All"]}`, true},
		{"DELETE", "", protobufDelete(t, "example.shadow-reconciler.io/v1", []string{"All"}), true},
		{"DELETE", "", protobufDelete(t, "v1", nil), false},
		{"DELETE", "", "k8s\x00garbage", false},
		// The server reads a DELETE's options from its body when it has one: the query alone
		// would let this delete persist.
		{"DELETE", "?dryRun=All", `{"propagationPolicy":"Background"}`, false},
		{"DELETE", "", "", false},
	}
	for _, c := range cases {
		code := send(c.method, c.query, c.body)
		if c.allowed != (code == http.StatusOK) {
			t.Errorf("%s %s %s: status %d", c.method, c.query, c.body, code)
		}
	}
	if stats.Refused() != 6 || local.Refused() != 6 || stats.DryRunRequests() != 7 {
		t.Errorf("refused %d (local %d), dry runs %d", stats.Refused(), local.Refused(), stats.DryRunRequests())
	}
	for _, r := range reached {
		if !strings.HasPrefix(r, "GET") && !strings.HasSuffix(r, "dry=true") {
			t.Errorf("a write that is not a dry run reached the server: %s", r)
		}
	}
	if len(reached) != 8 {
		t.Errorf("reached: %v", reached)
	}
}

// The whole client as a controller builds it (NewDryRun over a REST config): its writes carry
// dryRun=All, its user agent is its own, and a refusal is a 403 the operation sees.
func TestTheDryRunClientOverRESTSendsOnlyDryRuns(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(context.Background()))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns","uid":"u"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer server.Close()
	cfg := &rest.Config{Host: server.URL}
	mapper, scheme := restMapper(), clientScheme()
	d, err := NewDryRun(cfg, nil, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	c := d.ForReconcile()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, cm, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("requests: %d", len(seen))
	}
	for _, r := range seen {
		if r.UserAgent() != UserAgent {
			t.Errorf("user agent %q", r.UserAgent())
		}
	}
	if seen[0].URL.Query().Get("dryRun") != "All" {
		t.Errorf("create without dryRun: %s", seen[0].URL)
	}
	if d.Stats().Refused() != 0 || d.Stats().DryRunRequests() != 2 {
		t.Errorf("refused %d, dry runs %d", d.Stats().Refused(), d.Stats().DryRunRequests())
	}
}

// protobufDelete is a DELETE body as client-go encodes it in protobuf: the magic, then an
// envelope naming apiVersion and kind around the DeleteOptions.
func protobufDelete(t *testing.T, apiVersion string, dryRun []string) string {
	t.Helper()
	options := &metav1.DeleteOptions{DryRun: dryRun}
	raw, err := options.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	envelope := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: "DeleteOptions"}, Raw: raw}
	data, err := envelope.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return "k8s\x00" + string(data)
}

// The dry-run config makes a typed clientset's writes dry runs, whatever the caller asked
// for: dryRun=All in the query, and in a DELETE's body options (JSON or protobuf), which the
// API server reads instead of the query. Reads pass untouched.
func TestTheDryRunConfigMakesEveryWriteOfAnyClientADryRun(t *testing.T) {
	type request struct {
		method, query string
		options       *metav1.DeleteOptions
	}
	var mu sync.Mutex
	var seen []request
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := request{method: r.Method, query: r.URL.RawQuery}
		if r.Method == http.MethodDelete && len(body) > 0 {
			options, err := deleteOptions(r.Header.Get("Content-Type"), body)
			if err != nil {
				t.Errorf("the DELETE body: %v", err)
			}
			got.options = options
		}
		mu.Lock()
		seen = append(seen, got)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete {
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns"}}`))
	}))
	defer server.Close()
	d, err := NewDryRunConfig(&rest.Config{Host: server.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		seen = nil
		cfg := d.Config()
		cfg.ContentType = contentType
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		cms := cs.CoreV1().ConfigMaps("ns")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
		if _, err := cms.Get(ctx, "x", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "me"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Patch(ctx, "x", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		background := metav1.DeletePropagationBackground
		if err := cms.Delete(ctx, "x", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			t.Fatal(err)
		}
		if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "a=b"}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 6 {
			t.Fatalf("%s: %d requests", contentType, len(seen))
		}
		if seen[0].method != http.MethodGet || strings.Contains(seen[0].query, "dryRun") {
			t.Errorf("%s: a read was changed: %+v", contentType, seen[0])
		}
		for _, r := range seen[1:] {
			query, _ := url.ParseQuery(r.query)
			if query.Get("dryRun") != "All" {
				t.Errorf("%s: %s without dryRun=All: %q", contentType, r.method, r.query)
			}
			if r.method == http.MethodDelete && r.options != nil && !slices.Equal(r.options.DryRun, []string{"All"}) {
				t.Errorf("%s: DELETE options without dryRun: %+v", contentType, r.options)
			}
		}
		if o := seen[4].options; o == nil || o.PropagationPolicy == nil || *o.PropagationPolicy != background {
			t.Errorf("%s: the DELETE's own options were lost: %+v", contentType, o)
		}
		if q, _ := url.ParseQuery(seen[1].query); q.Get("fieldManager") != "me" {
			t.Errorf("%s: the create's own query was lost: %q", contentType, seen[1].query)
		}
	}
	// A dynamic client built on the same config: its writes are dry runs too.
	seen = nil
	dyn, err := dynamic.NewForConfig(d.Config())
	if err != nil {
		t.Fatal(err)
	}
	configMaps := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns")
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	if _, err := configMaps.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := configMaps.Delete(context.Background(), "x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range seen {
		if q, _ := url.ParseQuery(r.query); q.Get("dryRun") != "All" || (r.options != nil && !slices.Equal(r.options.DryRun, []string{"All"})) {
			t.Errorf("dynamic client: %s without dryRun=All: %+v", r.method, r)
		}
	}
	if len(seen) != 2 || d.Stats().Refused() != 0 || d.Stats().DryRunRequests() != 12 {
		t.Errorf("%d requests, refused %d, dry runs %d", len(seen), d.Stats().Refused(), d.Stats().DryRunRequests())
	}
}
