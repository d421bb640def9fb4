package watchcodec

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// acceptProtobuf is the Accept header of a client with Options.Protobuf:
// protobuf where the API server has it (the kinds built into it), JSON
// elsewhere (custom resources, which it serves in JSON only).
const acceptProtobuf = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON

// Protobuf reports whether a client with Options.Protobuf receives
// objects of kind gvk in protobuf: a kind of client-go's scheme (the
// kinds built into kube-apiserver, in the versions client-go knows), not
// a list nor one of the meta.k8s.io kinds. Others are received in JSON
// (and lists and meta.k8s.io kinds decoded by client-go).
func Protobuf(gvk schema.GroupVersionKind) bool { return protobufKind(gvk) != nil }

// protobufKind returns the pool of typed objects of gvk when Protobuf
// holds for it, else nil; the answer is computed once per kind.
func protobufKind(gvk schema.GroupVersionKind) *sync.Pool {
	if v, ok := protobufKinds.Load(gvk); ok {
		return v.(*sync.Pool)
	}
	var pool *sync.Pool
	t, ok := clientgoscheme.Scheme.AllKnownTypes()[gvk]
	// The meta.k8s.io kinds are registered in every group version
	// (WatchEvent, the option kinds) or as unversioned (Status, APIGroup).
	if ok && t.PkgPath() != metaPkgPath && reflect.PointerTo(t).Implements(protobufObjectType) &&
		!meta.IsListType(reflect.New(t).Interface().(runtime.Object)) {
		pool = &sync.Pool{New: func() any { return reflect.New(t).Interface() }}
	}
	v, _ := protobufKinds.LoadOrStore(gvk, pool)
	return v.(*sync.Pool)
}

var (
	protobufKinds sync.Map // schema.GroupVersionKind -> *sync.Pool (nil: not Protobuf)
	metaPkgPath   = reflect.TypeFor[metav1.Status]().PkgPath()

	protobufObjectType = reflect.TypeFor[protobufObject]()
)

// protobufInfo is client-go's protobuf media type (its length-delimited
// watch framing and envelope decoder) with an object decoder that makes
// Unstructured objects of the kinds client-go's scheme knows.
func protobufInfo(opts Options) (runtime.SerializerInfo, bool) {
	for _, info := range clientgoscheme.Codecs.WithoutConversion().SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			info.Serializer = protobufSerializer{Serializer: info.Serializer, opts: opts}
			return info, true
		}
	}
	return runtime.SerializerInfo{}, false
}

// protobufSerializer decodes a protobuf object (a watch event's object,
// a response) into an Unstructured when the caller asks for no particular
// type or for an Unstructured: into the typed object of client-go's
// scheme, then into the map decodeJSON makes of the object's JSON
// (toUnstructured), so that what the cache holds does not depend on the
// media type. A meta.k8s.io kind (the Status of an ERROR event or of a
// refused request) stays typed, as client-go's JSON decoder makes it.
type protobufSerializer struct {
	runtime.Serializer
	opts Options
}

func (s protobufSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	u, unstr := into.(*unstructured.Unstructured)
	if (into != nil && !unstr) || (unstr && u == nil) {
		return s.Serializer.Decode(data, defaults, into)
	}
	var obj runtime.Object
	gvk, raw, ok := splitUnknown(data)
	if pool := protobufKind(gvk); ok && pool != nil {
		// The typed object is garbage once converted: it comes from a
		// pool, and the envelope's bytes are not copied.
		typed := pool.Get().(protobufObject)
		defer func() {
			typed.Reset()
			pool.Put(typed)
		}()
		if err := typed.Unmarshal(raw); err != nil {
			return nil, &gvk, err
		}
		obj = typed
	} else {
		typed, actual, err := s.Serializer.Decode(data, defaults, nil)
		if err != nil || !Protobuf(*actual) {
			return typed, actual, err
		}
		obj, gvk = typed, *actual
	}
	if s.opts.DropManagedFields {
		if acc, err := meta.Accessor(obj); err == nil {
			acc.SetManagedFields(nil)
		}
	}
	m, err := toUnstructured(obj)
	if err != nil {
		return nil, &gvk, err
	}
	m["apiVersion"] = internString(gvk.GroupVersion().String())
	m["kind"] = internString(gvk.Kind)
	decodedOnce.Add(1)
	if unstr {
		u.Object = m
		return u, &gvk, nil
	}
	return &unstructured.Unstructured{Object: m}, &gvk, nil
}

// protobufObject is a typed object of client-go's scheme (gogo-generated
// protobuf methods).
type protobufObject interface {
	runtime.Object
	Reset()
	Unmarshal([]byte) error
}

// protobufPrefix starts every protobuf object the API server writes.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\x00"

// splitUnknown reads the envelope of a protobuf object (protobufPrefix and
// a runtime.Unknown: field 1 the TypeMeta, its fields 1 apiVersion and 2
// kind; field 2 the object's bytes; 3 and 4 the content encoding and type,
// which client-go's decoder ignores) as client-go's decoder does, without
// copying the object's bytes: raw aliases data. It reports false for
// anything client-go's decoder must decide (malformed input, a missing
// kind or version, a version it cannot parse).
func splitUnknown(data []byte) (schema.GroupVersionKind, []byte, bool) {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return schema.GroupVersionKind{}, nil, false
	}
	var apiVersion, kind string
	var raw []byte
	ok := eachBytesField(data[len(protobufPrefix):], func(num protowire.Number, v []byte) bool {
		switch num {
		case 1:
			return eachBytesField(v, func(num protowire.Number, v []byte) bool {
				switch num {
				case 1:
					apiVersion = string(v)
				case 2:
					kind = string(v)
				}
				return true
			})
		case 2:
			raw = v
		}
		return true
	})
	if !ok {
		return schema.GroupVersionKind{}, nil, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Version == "" || kind == "" {
		return schema.GroupVersionKind{}, nil, false
	}
	return gv.WithKind(kind), raw, true
}

// eachBytesField calls f with each length-delimited field of b in order
// (the only wire type of runtime.Unknown's and TypeMeta's fields); false
// for another wire type, malformed input, or when f returns false.
func eachBytesField(b []byte, f func(protowire.Number, []byte) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return false
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 || !f(num, v) {
			return false
		}
		b = b[n+m:]
	}
	return true
}

// KubeTypesMinor is the minor version of the Kubernetes API types this
// program is built with: the k8s.io/api module v0.N.x of go.mod is
// Kubernetes 1.N (a test holds the two equal).
const KubeTypesMinor = 37

// ProtobufLossless reports, with the reason when not, whether objects of
// the kinds of Protobuf decode from server's protobuf without loss into
// the types of client-go's scheme: when the server is Kubernetes 1.N with
// N at most KubeTypesMinor. A newer server's kinds can have fields the
// types lack, which protobuf decoding drops without a word, where JSON
// keeps every field (Kubernetes adds API fields in minor releases only).
func ProtobufLossless(server *version.Info) (bool, string) {
	minor, err := strconv.Atoi(strings.TrimSuffix(server.Minor, "+"))
	if server.Major != "1" || err != nil {
		return false, fmt.Sprintf("the API server's version %q.%q is not one of Kubernetes 1.x", server.Major, server.Minor)
	}
	if minor > KubeTypesMinor {
		return false, fmt.Sprintf("the API server (1.%d) is newer than this program's Kubernetes types (1.%d)", minor, KubeTypesMinor)
	}
	return true, ""
}
