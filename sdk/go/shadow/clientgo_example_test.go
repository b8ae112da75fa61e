package shadow_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/plan"
	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow"
)

const labelPlan = `
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: label
spec:
  operations:
    - name: Label
      phase: 1
      category: non-critical
      shadow: dry-run
      retryOnConflict: true
  legacy:
    order: [Label]
`

// A client-go controller (a typed clientset, a lister, a workqueue) in shadow: its clientset is
// built twice (shadow.NewClients), each operation writes through the one of its run, the
// workqueue's worker syncs through the engine. Here the control's patch meets a 409 (another
// writer changed the object after the cache saw it); the candidate, under retry-on-conflict,
// re-evaluates the step in dry run and would have succeeded.
func ExampleSync() {
	p, err := plan.Parse("label.yaml", []byte(labelPlan))
	if err != nil {
		panic(err)
	}
	server, seen := apiServer()
	defer server.Close()
	config := &rest.Config{Host: server.URL}

	dry, err := shadow.NewDryRunConfig(config)
	if err != nil {
		panic(err)
	}
	clients, err := shadow.NewClients(config, dry, kubernetes.NewForConfig)
	if err != nil {
		panic(err)
	}
	type run = shadow.Run[*corev1.ConfigMap, struct{}]
	ops := map[string]shadow.Op[*corev1.ConfigMap, struct{}]{
		"Label": func(ctx context.Context, r *run) error {
			patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"labels":{"reconciled":"true"}}}`, r.Object.ResourceVersion)
			_, err := clients.For(r).CoreV1().ConfigMaps(r.Object.Namespace).Patch(ctx, r.Object.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		},
	}
	engine, err := shadow.New(p, nil, ops, shadow.Options{DryRun: dry, Kind: "ConfigMap"})
	if err != nil {
		panic(err)
	}

	// The informer's lister, here a map.
	cache := map[string]*corev1.ConfigMap{
		"team-0/hc": {ObjectMeta: metav1.ObjectMeta{Namespace: "team-0", Name: "hc", UID: "uid-0", ResourceVersion: "7"}},
	}
	get := func(key string) (*corev1.ConfigMap, error) {
		if obj, ok := cache[key]; ok {
			return obj, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key)
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	queue.Add("team-0/hc")
	shadow.ProcessNext(context.Background(), queue, shadow.Sync(engine, get))

	for _, request := range seen() {
		fmt.Println(request)
	}
	fmt.Println("requeued after the control's failure:", queue.NumRequeues("team-0/hc"))
	fmt.Println("dry-run requests:", dry.Stats().DryRunRequests(), "refused:", dry.Stats().Refused())
	// Output:
	// PATCH /api/v1/namespaces/team-0/configmaps/hc: 409
	// PATCH /api/v1/namespaces/team-0/configmaps/hc?dryRun=All: 200
	// requeued after the control's failure: 1
	// dry-run requests: 1 refused: 0
}

// apiServer answers a ConfigMap PATCH: 409 to the first that is not a dry run (resourceVersion
// 7 is stale: another writer made it 8), 200 to the others; seen lists the requests.
func apiServer() (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var requests []string
	conflicted := false
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		path := r.URL.Path
		if r.URL.RawQuery != "" {
			path += "?" + r.URL.RawQuery
		}
		code := http.StatusOK
		body := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"hc","namespace":"team-0","resourceVersion":"9"}}`
		if r.URL.Query().Get("dryRun") == "" && !conflicted {
			conflicted = true
			code = http.StatusConflict
			body = `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,"message":"Operation cannot be fulfilled on configmaps \"hc\": the object has been modified"}`
		}
		requests = append(requests, fmt.Sprintf("%s %s: %d", r.Method, path, code))
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	return server, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), requests...)
	}
}
