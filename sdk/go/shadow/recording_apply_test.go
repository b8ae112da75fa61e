package shadow

import (
	"bytes"
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// allocating answers a server-side apply as the API server does for a Service: the answer,
// decoded into the configuration, carries the cluster IP the server allocated.
type allocating struct {
	client.Client
	u *unstructured.Unstructured
}

func (c allocating) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return unstructured.SetNestedField(c.u.Object, "10.96.0.17", "spec", "clusterIP")
}

// The request of a recorded server-side apply is what was sent, not the answer decoded into the
// same configuration: a field only the server set is allocated, never compared.
func TestARecordedApplyKeepsWhatWasSentApartFromTheAnswer(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Service")
	u.SetNamespace("team-0")
	u.SetName("kube-apiserver-private")
	if err := unstructured.SetNestedField(u.Object, "NodePort", "spec", "type"); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(allocating{Client: fake.NewClientBuilder().Build(), u: u})
	if err := rec.client().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u)); err != nil {
		t.Fatal(err)
	}
	got := rec.take()
	if len(got) != 1 || got[0].Request == nil {
		t.Fatalf("recorded %+v", got)
	}
	if bytes.Contains(got[0].Request.Bytes, []byte("clusterIP")) || !bytes.Contains(got[0].Request.Bytes, []byte("NodePort")) {
		t.Fatalf("the request recorded: %s", got[0].Request.Bytes)
	}
	answer, _ := got[0].Answer.(map[string]any)
	if ip, _, _ := unstructured.NestedString(answer, "spec", "clusterIP"); ip != "10.96.0.17" {
		t.Fatalf("the answer recorded: %v", got[0].Answer)
	}
}
