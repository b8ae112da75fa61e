package shadow

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// One client over a Routed config: a request with a candidate run's context is a dry run, with
// the candidate's User-Agent, counted in the run; any other goes as the controller's.
func TestARoutedClientSendsTheCandidatesRequestsAsDryRuns(t *testing.T) {
	type seen struct{ method, query, agent, auth string }
	var mu sync.Mutex
	var requests []seen
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, seen{r.Method, r.URL.RawQuery, r.UserAgent(), r.Header.Get("Authorization")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns"}}`))
	}))
	defer server.Close()
	control := &rest.Config{Host: server.URL, UserAgent: "controller/1", BearerToken: "secret"}
	dry, err := NewDryRunConfig(control)
	if err != nil {
		t.Fatal(err)
	}
	routed, err := dry.Routed(control)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(routed)
	if err != nil {
		t.Fatal(err)
	}
	local := &GuardStats{}
	candidate := newShadowRun(context.Background()).ctx
	candidate = WithCounters(candidate, local)
	patch := func(ctx context.Context) {
		if _, err := cs.CoreV1().ConfigMaps("ns").Patch(ctx, "x", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(context.Background())
	patch(candidate)
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(candidate, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(requests) != 3 {
		t.Fatalf("requests: %+v", requests)
	}
	want := []seen{
		{http.MethodPatch, "", "controller/1", "Bearer secret"},
		{http.MethodPatch, "dryRun=All", UserAgent, "Bearer secret"},
		{http.MethodPost, "dryRun=All", UserAgent, "Bearer secret"},
	}
	for i := range want {
		if requests[i] != want[i] {
			t.Errorf("request %d: %+v, want %+v", i, requests[i], want[i])
		}
	}
	if local.DryRunRequests() != 2 || dry.Stats().Refused() != 0 {
		t.Errorf("the run counted %d dry runs, %d refused", local.DryRunRequests(), dry.Stats().Refused())
	}
	if InCandidate(context.Background()) || !InCandidate(candidate) {
		t.Error("InCandidate")
	}
}
