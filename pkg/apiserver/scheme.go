package apiserver

import (
	"bytes"
	"fmt"
	"io"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/versioning"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// metaScheme knows the typed objects the server sends besides the served
// (schemaless) objects: the meta.k8s.io types such as Status and WatchEvent,
// and the discovery documents.
var metaScheme = newMetaScheme()

// metaCodecs encode the generic server's own responses (discovery, errors
// of the filter chain such as 401 and 403) in JSON or YAML. Protobuf is left
// out: kubectl asks for it first in discovery requests but cannot decode a
// protobuf Status there, and would print "unknown" instead of the reason.
var metaCodecs = textOnly{serializer.NewCodecFactory(metaScheme)}

// textOnly is a negotiated serializer without the protobuf media type.
type textOnly struct{ serializer.CodecFactory }

func (t textOnly) SupportedMediaTypes() []runtime.SerializerInfo {
	var out []runtime.SerializerInfo
	for _, info := range t.CodecFactory.SupportedMediaTypes() {
		if info.MediaType != runtime.ContentTypeProtobuf {
			out = append(out, info)
		}
	}
	return out
}

func newMetaScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	metav1.AddMetaToScheme(s)
	return s
}

// objectCreater makes an Unstructured object for every kind the meta scheme
// does not know: served objects are schemaless.
type objectCreater struct{}

func (objectCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if metaScheme.Recognizes(gvk) {
		return metaScheme.New(gvk)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// objectTyper reports the kind an Unstructured object carries and asks the
// meta scheme about typed objects.
type objectTyper struct{}

func (objectTyper) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		gvk := u.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" {
			return nil, false, runtime.NewMissingKindErr("object has no kind")
		}
		if gvk.Version == "" {
			return nil, false, runtime.NewMissingVersionErr("object has no apiVersion")
		}
		return []schema.GroupVersionKind{gvk}, false, nil
	}
	return metaScheme.ObjectKinds(obj)
}

func (objectTyper) Recognizes(gvk schema.GroupVersionKind) bool {
	return gvk.Kind != "" && gvk.Version != ""
}

// objectDefaulter defaults typed meta objects; schemaless objects have no
// defaults.
type objectDefaulter struct{}

func (objectDefaulter) Default(obj runtime.Object) {
	if _, ok := obj.(runtime.Unstructured); !ok {
		metaScheme.Default(obj)
	}
}

// objectConvertor converts between the (single) served version of a kind and
// itself. Served kinds have one version, so conversion is a copy that checks
// the target group and version; typed meta objects pass through.
//
// One exception serves strategic merge patch (the patch type kubectl uses for
// built-in kinds) in standalone mode: asked to convert the storage's New()
// object (the patch handler's schema reference, marked with schemaRefKey) of
// a kind client-go knows, it returns that kind's typed zero value, whose
// struct tags carry the list merge keys.
type objectConvertor struct{}

func (objectConvertor) Convert(in, out, _ any) error {
	src, ok1 := in.(runtime.Unstructured)
	dst, ok2 := out.(runtime.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	dst.SetUnstructuredContent(src.UnstructuredContent())
	return nil
}

func (c objectConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		if _, isList := in.(*unstructured.UnstructuredList); isList {
			return in, nil
		}
		kinds, _, err := metaScheme.ObjectKinds(in)
		if err != nil {
			return nil, err
		}
		in.GetObjectKind().SetGroupVersionKind(kinds[0])
		return in, nil
	}
	gvk := u.GroupVersionKind()
	want, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if !ok || want.GroupVersion() != gvk.GroupVersion() {
		return nil, fmt.Errorf("%s is served in one version only and cannot be converted to %v", gvk, target)
	}
	if isSchemaReference(u) && clientgoscheme.Scheme.Recognizes(gvk) {
		return clientgoscheme.Scheme.New(gvk)
	}
	return u, nil
}

// schemaRefKey marks the empty objects storage.New returns. Decoding into
// such an object replaces its content, so the mark never reaches the store.
const schemaRefKey = "\x00schemaReference"

func isSchemaReference(u *unstructured.Unstructured) bool {
	_, ok := u.Object[schemaRefKey]
	return ok
}

// ConvertFieldLabel accepts the field selectors every object supports.
func (objectConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	switch label {
	case "metadata.name", "metadata.namespace":
		return label, value, nil
	}
	return "", "", fmt.Errorf("field label not supported: %s (use metadata.name or metadata.namespace)", label)
}

// parameterCodec decodes query parameters (GetOptions, ListOptions, ...)
// with the meta.k8s.io/v1 definitions, whatever the group of the request.
type parameterCodec struct{}

func (parameterCodec) DecodeParameters(parameters url.Values, _ schema.GroupVersion, into runtime.Object) error {
	return metav1.ParameterCodec.DecodeParameters(parameters, metav1.SchemeGroupVersion, into)
}

func (parameterCodec) EncodeParameters(obj runtime.Object, _ schema.GroupVersion) (url.Values, error) {
	return metav1.ParameterCodec.EncodeParameters(obj, metav1.SchemeGroupVersion)
}

// objectSerializer is the negotiated serializer of served objects: JSON
// (also for watch streams) and YAML, decoding into Unstructured.
type objectSerializer struct {
	infos []runtime.SerializerInfo
}

func newObjectSerializer() objectSerializer {
	c, t := objectCreater{}, objectTyper{}
	opts := func(o jsonserializer.SerializerOptions) *jsonserializer.Serializer {
		return jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, c, t, o)
	}
	return objectSerializer{infos: []runtime.SerializerInfo{{
		MediaType:        runtime.ContentTypeJSON,
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       opts(jsonserializer.SerializerOptions{StreamingCollectionsEncoding: true}),
		PrettySerializer: opts(jsonserializer.SerializerOptions{Pretty: true}),
		StrictSerializer: opts(jsonserializer.SerializerOptions{Strict: true}),
		StreamSerializer: &runtime.StreamSerializerInfo{
			EncodesAsText: true,
			Serializer:    opts(jsonserializer.SerializerOptions{}),
			Framer:        jsonserializer.Framer,
		},
	}, {
		MediaType:        runtime.ContentTypeYAML,
		MediaTypeType:    "application",
		MediaTypeSubType: "yaml",
		EncodesAsText:    true,
		Serializer:       opts(jsonserializer.SerializerOptions{Yaml: true}),
		StrictSerializer: opts(jsonserializer.SerializerOptions{Yaml: true, Strict: true}),
	}}}
}

func (s objectSerializer) SupportedMediaTypes() []runtime.SerializerInfo { return s.infos }

func (s objectSerializer) EncoderForVersion(enc runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return freshBufferEncoder{versioning.NewCodec(enc, nil, objectConvertor{}, objectCreater{}, objectTyper{}, objectDefaulter{}, gv, nil, "dcontroller-apiserver")}
}

// freshBufferEncoder encodes into a buffer of its own and hands it over
// when asked to write into a runtime.Splice, the reusable buffers a watch
// handler keeps for the life of its watch: writing a large object there
// would grow them for good, so each of a user's many watches would keep
// the size of the largest object it ever encoded. It leaves out
// runtime.EncoderWithAllocator for the same reason (the allocator is kept
// per watch as well).
type freshBufferEncoder struct{ runtime.Encoder }

func (e freshBufferEncoder) Encode(obj runtime.Object, w io.Writer) error {
	sp, ok := w.(runtime.Splice)
	if !ok {
		return e.Encoder.Encode(obj, w)
	}
	var buf bytes.Buffer
	if err := e.Encoder.Encode(obj, &buf); err != nil {
		return err
	}
	sp.Splice(buf.Bytes())
	return nil
}

func (s objectSerializer) DecoderToVersion(dec runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return versioning.NewCodec(nil, dec, objectConvertor{}, objectCreater{}, objectTyper{}, objectDefaulter{}, nil, gv, "dcontroller-apiserver")
}

// typedProtobuf reads and writes Kubernetes protobuf (the encoding kubectl's
// typed clients send, e.g. `kubectl create configmap`) for the built-in
// kinds client-go knows: a body is decoded into the Go type and converted to
// an unstructured object; an unstructured object is converted to the Go type
// to be encoded (fields the type does not have are dropped). Only the
// resources of such kinds offer it.
type typedProtobuf struct {
	pb runtime.Serializer
}

func newTypedProtobuf(raw bool) typedProtobuf {
	if raw {
		return typedProtobuf{pb: protobuf.NewRawSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)}
	}
	return typedProtobuf{pb: protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)}
}

func (p typedProtobuf) Identifier() runtime.Identifier {
	return "dcontroller-typed-" + p.pb.Identifier()
}

func (p typedProtobuf) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	typedInto := runtime.Object(nil)
	if _, ok := into.(runtime.Unstructured); !ok {
		typedInto = into
	}
	obj, gvk, err := p.pb.Decode(data, defaults, typedInto)
	if err != nil {
		return nil, gvk, err
	}
	u, ok := into.(runtime.Unstructured)
	if !ok {
		return obj, gvk, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, gvk, err
	}
	content["apiVersion"], content["kind"] = gvk.GroupVersion().String(), gvk.Kind
	u.SetUnstructuredContent(content)
	return into, gvk, nil
}

func (p typedProtobuf) Encode(obj runtime.Object, w io.Writer) error {
	switch u := obj.(type) {
	case *unstructured.Unstructured:
		typed, err := toTyped(u.GroupVersionKind(), u.Object)
		if err != nil {
			return err
		}
		return p.pb.Encode(typed, w)
	case *unstructured.UnstructuredList:
		listGVK := u.GroupVersionKind()
		content := u.UnstructuredContent()
		typed, err := toTyped(listGVK, content)
		if err != nil {
			return err
		}
		return p.pb.Encode(typed, w)
	}
	return p.pb.Encode(obj, w)
}

func toTyped(gvk schema.GroupVersionKind, content map[string]any) (runtime.Object, error) {
	typed, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be encoded as protobuf: %w", gvk, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, typed); err != nil {
		return nil, err
	}
	typed.GetObjectKind().SetGroupVersionKind(gvk)
	return typed, nil
}

// withProtobuf returns the serializer of a built-in kind: JSON, YAML and
// Kubernetes protobuf.
func (s objectSerializer) withProtobuf() objectSerializer {
	infos := append([]runtime.SerializerInfo{}, s.infos...)
	infos = append(infos, runtime.SerializerInfo{
		MediaType:        runtime.ContentTypeProtobuf,
		MediaTypeType:    "application",
		MediaTypeSubType: "vnd.kubernetes.protobuf",
		Serializer:       newTypedProtobuf(false),
		// Protobuf cannot carry unknown or duplicate fields: strict is the same.
		StrictSerializer: newTypedProtobuf(false),
		StreamSerializer: &runtime.StreamSerializerInfo{
			Serializer: newTypedProtobuf(true),
			Framer:     protobuf.LengthDelimitedFramer,
		},
	})
	return objectSerializer{infos: infos}
}
