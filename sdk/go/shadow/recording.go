package shadow

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shadow-reconciler/shadow-reconciler/sdk/go/writes"
)

// recorder is a client whose writes the API server accepted are logged, for the operations
// whose two code paths' writes are compared: the control's real client, or the candidate's
// dry-run client. Requests pass unchanged. An accepted write is logged with its verb, the object
// it addressed (group and resource through the client's REST mapper), the object's kind and the
// answer decoded into the caller's object, as JSON values with the object's apiVersion and kind
// set, so both sides of a comparison are shaped the same way. DeleteAllOf is not logged (it
// names no object).
type recorder struct {
	client.Client
	mu     sync.Mutex
	paused bool
	writes []writes.Write
}

// newRecorder records c's writes; nil for a nil c (an engine without a controller-runtime
// client records nothing).
func newRecorder(c client.Client) *recorder {
	if c == nil {
		return nil
	}
	return &recorder{Client: c}
}

// client is the recorder as the run's client: nil when there is none.
func (r *recorder) client() client.Client {
	if r == nil {
		return nil
	}
	return r
}

// take returns what was logged so far; the log is empty afterwards. A nil recorder (an engine
// without a controller-runtime client) logged nothing.
func (r *recorder) take() []writes.Write {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.writes
	r.writes = nil
	return out
}

// recording empties the log and says whether the writes from now on are logged (they are
// unless told otherwise).
func (r *recorder) recording(on bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused, r.writes = !on, nil
}

func (r *recorder) logging() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.paused
}

func (r *recorder) add(w writes.Write) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paused {
		r.writes = append(r.writes, w)
	}
}

// object names obj (of gvk, "" to look it up) as a write addresses it, and its kind.
func (r *recorder) object(obj runtime.Object, gvk schema.GroupVersionKind, namespace, name, subresource string) (writes.ObjectRef, schema.GroupVersionKind, bool) {
	if gvk.Empty() {
		var err error
		if gvk, err = r.GroupVersionKindFor(obj); err != nil || gvk.Kind == "" {
			return writes.ObjectRef{}, gvk, false
		}
	}
	ref := writes.ObjectRef{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s", Namespace: namespace, Name: name, Subresource: subresource}
	if mapper := r.RESTMapper(); mapper != nil {
		if mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			ref.Resource = mapping.Resource.Resource
			if mapping.Scope != nil && mapping.Scope.Name() == meta.RESTScopeNameRoot {
				ref.Namespace = ""
			}
		}
	}
	return ref, gvk, true
}

// answer is obj as decoded JSON values, with its apiVersion and kind.
func answer(obj runtime.Object, gvk schema.GroupVersionKind) (any, bool) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, false
	}
	content["apiVersion"], content["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return content, true
}

// sent is the body a write of obj sends (obj before the call, which decodes the answer into
// it), nil when the writes are not logged or obj cannot be encoded.
func (r *recorder) sent(obj runtime.Object) *writes.RequestBody {
	if !r.logging() || obj == nil {
		return nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	return &writes.RequestBody{ContentType: "application/json", Bytes: data}
}

// patchSent is the body of a patch of obj, nil when the writes are not logged.
func (r *recorder) patchSent(obj client.Object, patch client.Patch) *writes.RequestBody {
	if !r.logging() {
		return nil
	}
	data, err := patch.Data(obj)
	if err != nil {
		return nil
	}
	return &writes.RequestBody{ContentType: string(patch.Type()), Bytes: data}
}

// written logs an accepted write of obj, whose answer was decoded into obj (a delete has
// none), and whose request sent request.
func (r *recorder) written(verb writes.Verb, obj client.Object, subresource string, request *writes.RequestBody) {
	r.writtenAs(verb, obj, subresource, nil, request)
}

// writtenAs logs an accepted write of obj's subresource whose answer was decoded into sub, an
// object of its own (an eviction, a token request: another kind).
func (r *recorder) writtenAs(verb writes.Verb, obj client.Object, subresource string, sub runtime.Object, request *writes.RequestBody) {
	if !r.logging() {
		return
	}
	ref, gvk, ok := r.object(obj, schema.GroupVersionKind{}, obj.GetNamespace(), obj.GetName(), subresource)
	if !ok {
		return
	}
	w := writes.Write{Verb: verb, Object: ref, Kind: gvk.Kind, Request: request}
	var answered runtime.Object = obj
	if sub != nil {
		answered = sub
		if own, err := r.GroupVersionKindFor(sub); err == nil {
			gvk, w.Kind = own, own.Kind
		}
	}
	if verb != writes.Delete {
		w.Answer, w.HasAnswer = answer(answered, gvk)
	}
	r.add(w)
}

// applySent is the request of a server-side apply: the configuration before the call, which
// decodes the answer into it (nil when not recording).
func (r *recorder) applySent(ac runtime.ApplyConfiguration) []byte {
	if !r.logging() {
		return nil
	}
	data, err := json.Marshal(ac)
	if err != nil {
		return nil
	}
	return data
}

// applied logs an accepted server-side apply whose request was sent (applySent): the answer was
// decoded into the configuration.
func (r *recorder) applied(ac runtime.ApplyConfiguration, subresource string, sent []byte) {
	if !r.logging() || sent == nil {
		return
	}
	data, err := json.Marshal(ac)
	if err != nil {
		return
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil || u.GetName() == "" {
		return
	}
	gvk := u.GroupVersionKind()
	ref, gvk, ok := r.object(u, gvk, u.GetNamespace(), u.GetName(), subresource)
	if !ok {
		return
	}
	w := writes.Write{Verb: writes.Patch, Object: ref, Kind: gvk.Kind,
		Request: &writes.RequestBody{ContentType: string(types.ApplyYAMLPatchType), Bytes: sent}}
	w.Answer, w.HasAnswer = answer(u, gvk)
	r.add(w)
}

func (r *recorder) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	request := r.sent(obj)
	if err := r.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	r.written(writes.Create, obj, "", request)
	return nil
}

func (r *recorder) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	request := r.sent(obj)
	if err := r.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	r.written(writes.Update, obj, "", request)
	return nil
}

func (r *recorder) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	request := r.patchSent(obj, patch)
	if err := r.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	r.written(writes.Patch, obj, "", request)
	return nil
}

func (r *recorder) Apply(ctx context.Context, ac runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	sent := r.applySent(ac)
	if err := r.Client.Apply(ctx, ac, opts...); err != nil {
		return err
	}
	r.applied(ac, "", sent)
	return nil
}

func (r *recorder) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := r.Client.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	r.written(writes.Delete, obj, "", nil)
	return nil
}

func (r *recorder) Status() client.SubResourceWriter { return r.SubResource("status") }

func (r *recorder) SubResource(name string) client.SubResourceClient {
	return &recordingSubResource{SubResourceClient: r.Client.SubResource(name), recorder: r, name: name}
}

type recordingSubResource struct {
	client.SubResourceClient
	recorder *recorder
	name     string
}

func (s *recordingSubResource) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	request := s.recorder.sent(sub)
	if err := s.SubResourceClient.Create(ctx, obj, sub, opts...); err != nil {
		return err
	}
	s.recorder.writtenAs(writes.Create, obj, s.name, sub, request)
	return nil
}

func (s *recordingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	request := s.recorder.sent(obj)
	if err := s.SubResourceClient.Update(ctx, obj, opts...); err != nil {
		return err
	}
	s.recorder.written(writes.Update, obj, s.name, request)
	return nil
}

func (s *recordingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	request := s.recorder.patchSent(obj, patch)
	if err := s.SubResourceClient.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	s.recorder.written(writes.Patch, obj, s.name, request)
	return nil
}

func (s *recordingSubResource) Apply(ctx context.Context, ac runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	sent := s.recorder.applySent(ac)
	if err := s.SubResourceClient.Apply(ctx, ac, opts...); err != nil {
		return err
	}
	s.recorder.applied(ac, s.name, sent)
	return nil
}

// differenceEvent is the attributes of d's span event; the namespace, subresource and verbs
// are left out when empty.
func differenceEvent(d *writes.WriteDifference) []attribute.KeyValue {
	fields := d.Fields
	if fields == nil {
		fields = []string{}
	}
	attrs := []attribute.KeyValue{
		attribute.String(eventGroup, d.Group),
		attribute.String(eventKind, d.Kind),
		attribute.String(eventName, d.Name),
		attribute.StringSlice(eventFields, fields),
		attribute.Int64(eventFieldsTotal, int64(d.FieldsTotal)),
		attribute.Bool(eventIntended, d.Intended),
	}
	for _, optional := range [][2]string{
		{eventNamespace, d.Namespace}, {eventSubresource, d.Subresource},
		{eventControl, string(d.Control)}, {eventCandidate, string(d.Candidate)},
	} {
		if optional[1] != "" {
			attrs = append(attrs, attribute.String(optional[0], optional[1]))
		}
	}
	return attrs
}

// addDifferences puts one event per difference on span, at the time given.
func addDifferences(span trace.Span, differences []writes.WriteDifference, options ...trace.EventOption) {
	for i := range differences {
		span.AddEvent(eventWriteDifference, append([]trace.EventOption{trace.WithAttributes(differenceEvent(&differences[i])...)}, options...)...)
	}
}
