// Package watchcodec is a content negotiator for the dynamic client that
// decodes JSON watch events and responses into unstructured objects in one
// parse instead of several.
//
// client-go's dynamic client reads each watch event five times: the JSON
// framer scans the stream for the event's end, the event envelope
// (metav1.WatchEvent) is scanned for its apiVersion/kind and then decoded
// (copying the object's bytes into a RawExtension), and the object is
// scanned for its apiVersion/kind, checked for an "items" list and decoded
// into a map. Only the last pass builds anything. This negotiator keeps
// the framer, splits the envelope by its fixed prefix
// ({"type":"TYPE","object":...}, the shape the API server writes for a
// metav1.WatchEvent) and decodes the object once with the same JSON rules
// as client-go's (sigs.k8s.io/json: case-sensitive keys, integers as
// int64; see decodeJSON), into maps of their final size whose keys are
// shared between objects (a cache of many objects of one kind holds each
// field name once). Whatever it
// does not recognise (another envelope shape, a list, a kind of the
// meta.k8s.io/v1 scheme such as Status, a missing kind, a syntax error) is
// handed to client-go's own decoders unchanged, so errors and typed results
// are exactly client-go's.
//
// With Options.Protobuf the negotiator also takes protobuf, which the API
// server sends for the kinds built into it: client-go's decoder makes the
// typed object and toUnstructured turns it into the map the JSON decoder
// makes of the same object's JSON (see protobufSerializer).
//
// The same negotiator decodes responses into an Unstructured in one parse
// and encodes unstructured request bodies without reflection (AppendJSON,
// encoding/json's bytes); NewClient gives controller-runtime's client the
// benefit for its writes of unstructured objects (WriteClient).
package watchcodec

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// metaScheme holds the kinds client-go's dynamic client decodes into typed
// meta.k8s.io/v1 objects (Status, WatchEvent, the option kinds) rather
// than Unstructured; those go to the standard decoder.
var metaScheme = runtime.NewScheme()

func init() {
	metav1.AddToGroupVersion(metaScheme, schema.GroupVersion{Version: "v1"})
}

// Options change what the decoders make.
type Options struct {
	// DropManagedFields leaves metadata.managedFields out of every decoded
	// object (it is still checked as JSON): for a client whose objects
	// are cached and never asked for their field managers, where that
	// field is most of what decoding an object allocates.
	DropManagedFields bool
	// Protobuf asks for objects in protobuf where the API server has it
	// (see Protobuf) and decodes them into the Unstructured objects the
	// JSON decoders make of the same objects: the API server encodes an
	// object once per media type for all its watchers, and the other
	// clients of a cluster (kube-controller-manager, kubelets) watch the
	// built-in kinds in protobuf, so that a watch in JSON costs it an
	// encoding of each event of its own. For watches only: a list through
	// such a client is decoded by client-go's decoders.
	Protobuf bool
}

// DynamicConfig returns the dynamic client's configuration for cfg
// (dynamic.ConfigFor) with the one-parse JSON decoders in its negotiator.
// Requests, encoding and non-JSON media types are client-go's.
func DynamicConfig(cfg *rest.Config) *rest.Config {
	return DynamicConfigWithOptions(cfg, Options{})
}

// DynamicConfigWithOptions is DynamicConfig with decoders set by opts.
func DynamicConfigWithOptions(cfg *rest.Config, opts Options) *rest.Config {
	out := dynamic.ConfigFor(cfg)
	out.NegotiatedSerializer = WrapWithOptions(out.NegotiatedSerializer, opts)
	if opts.Protobuf {
		out.AcceptContentTypes = acceptProtobuf
	}
	return out
}

// NewDynamic returns a dynamic client over DynamicConfig(cfg), sharing
// httpClient's connections when it is not nil.
func NewDynamic(cfg *rest.Config, httpClient *http.Client) (dynamic.Interface, error) {
	return NewDynamicWithOptions(cfg, httpClient, Options{})
}

// NewDynamicWithOptions is NewDynamic with decoders set by opts.
func NewDynamicWithOptions(cfg *rest.Config, httpClient *http.Client, opts Options) (dynamic.Interface, error) {
	rc, err := unversionedClient(DynamicConfigWithOptions(cfg, opts), httpClient)
	if err != nil {
		return nil, err
	}
	return dynamic.New(rc), nil
}

// unversionedClient is a REST client of cfg over httpClient, or over one
// made from cfg when httpClient is nil.
func unversionedClient(cfg *rest.Config, httpClient *http.Client) (*rest.RESTClient, error) {
	if httpClient != nil {
		return rest.UnversionedRESTClientForConfigAndClient(cfg, httpClient)
	}
	return rest.UnversionedRESTClientFor(cfg)
}

// Wrap returns ns with its application/json serializer (the decoder of
// responses and of watched objects) and stream serializer (the decoder of
// watch envelopes) replaced by one-parse decoders that fall back to ns's
// own. Other media types are unchanged; Options.Protobuf adds protobuf.
func Wrap(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return WrapWithOptions(ns, Options{})
}

// WrapWithOptions is Wrap with decoders set by opts.
func WrapWithOptions(ns runtime.NegotiatedSerializer, opts Options) runtime.NegotiatedSerializer {
	infos := append([]runtime.SerializerInfo(nil), ns.SupportedMediaTypes()...)
	for i := range infos {
		if infos[i].MediaType != runtime.ContentTypeJSON {
			continue
		}
		infos[i].Serializer = objectSerializer{Serializer: infos[i].Serializer, opts: opts}
		if ss := infos[i].StreamSerializer; ss != nil {
			s := *ss
			s.Serializer = envelopeSerializer{Serializer: ss.Serializer}
			s.Framer = jsonFramer
			infos[i].StreamSerializer = &s
		}
	}
	if opts.Protobuf {
		if info, ok := protobufInfo(opts); ok {
			infos = append(infos, info)
		}
	}
	return negotiated{NegotiatedSerializer: ns, infos: infos}
}

type negotiated struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }

// objectSerializer decodes a JSON object into *unstructured.Unstructured
// in one parse when the caller asks for no particular type (into == nil,
// as the REST client's Result.Get and the watch decoder do) or for an
// Unstructured (the dynamic client's responses, Result.Into).
type objectSerializer struct {
	runtime.Serializer
	opts Options
}

func (s objectSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	u, unstr := into.(*unstructured.Unstructured)
	if (into != nil && !unstr) || (unstr && (u == nil || defaults != nil)) {
		return s.Serializer.Decode(data, defaults, into)
	}
	obj, gvk, ok, metaKind := decodeObject(data, s.opts)
	if !ok {
		if !metaKind {
			handedOn.Add(1)
		}
		return s.Serializer.Decode(data, defaults, into)
	}
	decodedOnce.Add(1)
	if unstr {
		// As client-go's decoder into an Unstructured: its map is
		// replaced by the decoded one.
		u.Object = obj.Object
		return u, gvk, nil
	}
	return obj, gvk, nil
}

// Encode writes an Unstructured (a request body of the dynamic client)
// with AppendJSON: the bytes client-go's encoder writes (encoding/json's
// of the object's map, then a newline), without its reflection and its
// second pass over the output. Anything else, and an object AppendJSON
// refuses, is client-go's to encode (and to report).
func (s objectSerializer) Encode(obj runtime.Object, w io.Writer) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u == nil || u.Object == nil {
		return s.Serializer.Encode(obj, w)
	}
	bp := encodeBuffers.Get().(*[]byte)
	defer encodeBuffers.Put(bp)
	b, err := AppendJSON((*bp)[:0], u.Object)
	if err != nil {
		return s.Serializer.Encode(obj, w)
	}
	b = append(b, '\n')
	if cap(b) <= 1<<20 {
		*bp = b
	}
	_, err = w.Write(b)
	return err
}

// encodeBuffers holds Encode's scratch buffers (those up to 1 MiB are kept).
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

var decodedOnce, handedOn atomic.Int64

// Counts returns how many objects this process's negotiators decoded in
// one parse and how many they handed to client-go's decoder (lists,
// malformed input; not the meta.k8s.io kinds, such as the Status of an
// ERROR event or of a refused write, which are client-go's by design).
func Counts() (once, clientGo int64) { return decodedOnce.Load(), handedOn.Load() }

// decodeObject decodes data into an Unstructured, or reports false when
// client-go's decoder must decide (syntax error, missing apiVersion or
// kind, a list, a meta.k8s.io/v1 kind: then metaKind).
func decodeObject(data []byte, opts Options) (obj *unstructured.Unstructured, gvk *schema.GroupVersionKind, ok, metaKind bool) {
	v, ok := decodeJSONWith(data, opts.DropManagedFields)
	if !ok {
		return nil, nil, false, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, false, false
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, nil, false, false
	}
	if _, list := m["items"]; list {
		return nil, nil, false, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Version == "" {
		return nil, nil, false, false
	}
	k := gv.WithKind(kind)
	// The meta.k8s.io kinds in the core and meta groups (the v1 Status of
	// an ERROR event) are client-go's to decode, into typed objects. client-go also makes
	// typed objects of these kinds' names in any other group (its scheme
	// holds Status, APIGroup, APIVersions, APIGroupList and APIResourceList
	// as unversioned kinds), so that an informer of a custom resource named
	// Status rejects every event and never syncs; here such a resource is
	// what it is, an unstructured object of its group.
	if gv.Group == "" || gv.Group == metav1.GroupName {
		if _, err := metaScheme.New(k); err == nil {
			return nil, nil, false, true
		}
	}
	return &unstructured.Unstructured{Object: m}, &k, true, false
}

// envelopeSerializer splits a watch event {"type":"T","object":O} into
// metav1.WatchEvent{Type: T, Object.Raw: O} without parsing O (the object
// decoder parses it once). Other shapes go to the standard decoder.
type envelopeSerializer struct{ runtime.Serializer }

var (
	typePrefix   = []byte(`{"type":"`)
	objectPrefix = []byte(`","object":`)
)

func (s envelopeSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return s.Serializer.Decode(data, defaults, into)
	}
	typ, raw, ok := splitEvent(data)
	if !ok {
		return s.Serializer.Decode(data, defaults, into)
	}
	ev.Type = typ
	// Raw is the frame's own buffer, not a copy: it holds until the
	// stream's next Decode, and client-go's watch decoder
	// (rest/watch.Decoder) decodes the object from it before it reads the
	// next event; the object decoder copies what it keeps.
	ev.Object = runtime.RawExtension{Raw: raw}
	gvk := metav1.SchemeGroupVersion.WithKind("WatchEvent")
	return ev, &gvk, nil
}

// splitEvent matches {"type":"T","object":O} with T made of ASCII letters
// and O a JSON object, allowing whitespace after O and after the event.
// It does not validate O: the object decoder does.
func splitEvent(data []byte) (string, []byte, bool) {
	if !bytes.HasPrefix(data, typePrefix) {
		return "", nil, false
	}
	rest := data[len(typePrefix):]
	i := 0
	for i < len(rest) && (rest[i] >= 'A' && rest[i] <= 'Z' || rest[i] >= 'a' && rest[i] <= 'z') {
		i++
	}
	if i == 0 || !bytes.HasPrefix(rest[i:], objectPrefix) {
		return "", nil, false
	}
	typ := string(rest[:i])
	body := rest[i+len(objectPrefix):]
	if len(body) == 0 || body[0] != '{' {
		return "", nil, false
	}
	var s valueScanner
	end := s.scan(body)
	if end < 0 {
		return "", nil, false
	}
	// Only the envelope's closing brace may follow the object.
	tail := bytes.TrimSpace(body[end:])
	if len(tail) != 1 || tail[0] != '}' {
		return "", nil, false
	}
	return typ, body[:end], true
}
